# comprehension-hog: a comprehension building a hundred million findings.
# The evaluation process's memory ceiling or wall clock ends it, with
# outcome error.
package cairn.v1

decision := {"findings": [f |
	some i in numbers.range(1, 100000000)
	f := {"id": sprintf("hog-%d", [i]), "title": "hog", "message": "one finding per number"}
]}
