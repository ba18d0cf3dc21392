# template-hog: one strings.render_template call over a range of a hundred
# billion steps, writing a kilobyte each. A timeout cannot interrupt a
# built-in call: only the evaluation process's wall clock or memory
# ceiling ends it, with outcome error.
package cairn.v1

kilobyte := concat("", [s | some _ in numbers.range(1, 64); s := "0123456789abcdef"])

decision := {"findings": []} if {
	count(strings.render_template(concat("", ["{{range 100000000000}}", kilobyte, "{{end}}"]), {})) > 0
}
