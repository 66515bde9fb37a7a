#!/bin/sh
# A tiny booking "agent" for the getting-started pages of the book, written with curl so it
# needs nothing else: look the caller up by phone, book the contact the lookup returned, and
# only then tell the caller (an agent-side event). `understudy test` gives it
# UNDERSTUDY_URL_CRM (the crm integration's base URL for this attempt), UNDERSTUDY_URL and
# UNDERSTUDY_ATTEMPT_ID.
#   usage: book.sh PHONE DATE
set -eu
phone=${1:-555-0100}
date=${2:-2026-12-01}
crm=$UNDERSTUDY_URL_CRM/services/data/v60.0

found=$(curl -sf -G "$crm/query" \
  --data-urlencode "q=SELECT Id, FirstName, LastName, Phone FROM Contact WHERE Phone = '$phone'")
contact=$(printf '%s' "$found" | python3 -c 'import json,sys; print(json.load(sys.stdin)["records"][0]["Id"])')

curl -sf -X POST "$crm/sobjects/Appointment__c" -H 'Content-Type: application/json' \
  -d "{\"Contact__c\":\"$contact\",\"Requested_Date__c\":\"$date\"}" > /dev/null

curl -sf -X POST "$UNDERSTUDY_URL/_understudy/api/attempts/$UNDERSTUDY_ATTEMPT_ID/events" \
  -H 'Content-Type: application/json' \
  -d '{"name":"told_caller_booked","kind":"agent_message","text":"You are booked."}' > /dev/null
echo "booked $contact on $date"
