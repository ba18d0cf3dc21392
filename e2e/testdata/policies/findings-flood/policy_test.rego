package cairn.v1

test_five_hundred_findings if count(findings) == 500
