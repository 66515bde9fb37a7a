#!/bin/sh
# The buggy twin of book.sh: it books a contact id it made up, without looking the caller up
# first. The booking itself succeeds (the mock answers 201), so only the contract catches it.
#   usage: book_without_lookup.sh DATE
set -eu
date=${1:-2026-12-01}
crm=$UNDERSTUDY_URL_CRM/services/data/v60.0

curl -sf -X POST "$crm/sobjects/Appointment__c" -H 'Content-Type: application/json' \
  -d "{\"Contact__c\":\"003Hp00000Ab12CAAR\",\"Requested_Date__c\":\"$date\"}" > /dev/null

curl -sf -X POST "$UNDERSTUDY_URL/_understudy/api/attempts/$UNDERSTUDY_ATTEMPT_ID/events" \
  -H 'Content-Type: application/json' \
  -d '{"name":"told_caller_booked","kind":"agent_message","text":"You are booked."}' > /dev/null
echo "booked on $date"
