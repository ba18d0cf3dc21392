# findings-flood: 500 findings of about 890 bytes each, about 445 KB of
# findings per result: under the 512 KiB decision bound, so four
# attachments of it stay under the 2 MiB composition bound and five do not.
package cairn.v1

padding := concat("", [c | some _ in numbers.range(1, 850); c := "m"])

findings := [f |
	some i in numbers.range(1, 500)
	f := {"id": sprintf("flood-%d", [i]), "title": "flood", "message": padding}
]

decision := {"findings": findings}
