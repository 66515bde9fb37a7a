"""Validate a JUnit XML file against the vendored schema (xmlschema) and read it with a real
consumer (junitparser). Prints one JSON line: {"tests", "failures", "skipped", "cases":[{name, classname, result}]}.
Run by tests/it/report.rs: python3 check_junit.py FILE."""
import json
import os
import sys

import xmlschema
from junitparser import JUnitXml, Failure, Skipped, Error

path = sys.argv[1]
xsd = os.path.join(os.path.dirname(__file__), "..", "fixtures", "junit", "junit-10.xsd")
xmlschema.XMLSchema(xsd).validate(path)  # raises with the element path on any violation

xml = JUnitXml.fromfile(path)
cases = []
tests = failures = skipped = 0
for suite in xml:
    tests += suite.tests
    failures += suite.failures
    skipped += suite.skipped
    for case in suite:
        kinds = [type(r).__name__.lower() for r in case.result if isinstance(r, (Failure, Skipped, Error))]
        cases.append({
            "name": case.name,
            "classname": case.classname,
            "result": kinds[0] if kinds else "passed",
            "text": "".join((r.text or "") for r in case.result),
        })
print(json.dumps({"tests": tests, "failures": failures, "skipped": skipped, "cases": cases}))
