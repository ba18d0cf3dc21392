package cairn.v1_test

import data.cairn.v1

kilobyte := concat("", [s | some _ in numbers.range(1, 64); s := "0123456789abcdef"])

test_string_never_ends if {
	count(strings.render_template(concat("", ["{{range 100000000000}}", kilobyte, "{{end}}"]), {})) > 0
	v1.decision == {"findings": []}
}
