#!/usr/bin/env python3
"""README's DRK_* table must list exactly the options `drk options` prints, with
the same types and defaults. Usage: check_readme.py DRK_BINARY README"""
import re
import subprocess
import sys

drk, readme = sys.argv[1], sys.argv[2]
out = subprocess.run([drk, "options"], capture_output=True, text=True, check=True).stdout
tool = {}
for line in out.splitlines():
    m = re.match(r"^(DRK_[A-Z_]+)\s+(\S+)\s+(\S+)\s", line)
    if m:
        tool[m.group(1)] = (m.group(2), m.group(3))

doc = {}
for line in open(readme):
    m = re.match(r"^\|\s*`(DRK_[A-Z_]+)`\s*\|\s*([^|]+?)\s*\|\s*([^|]+?)\s*\|", line)
    if m:
        doc[m.group(1)] = (m.group(2), m.group(3).strip("`"))

bad = []
for name in sorted(set(tool) | set(doc)):
    if name not in doc:
        bad.append(f"{name} is an option but not in README's table")
    elif name not in tool:
        bad.append(f"README lists {name}, which is no option")
    elif tool[name] != doc[name]:
        bad.append(f"{name}: drk options says {tool[name]}, README says {doc[name]}")
if not tool:
    bad.append("could not read `drk options`")
for b in bad:
    print("FAIL:", b)
print("README's options table matches" if not bad else "README's options table is out of date")
sys.exit(1 if bad else 0)
