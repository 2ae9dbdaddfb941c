#!/usr/bin/env python3
"""Prints the text of a PDF (an example script)."""
import sys
print(open(sys.argv[1], "rb").read()[:100])
