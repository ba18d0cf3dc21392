package cairn.v1_test

import data.cairn.v1

test_template_never_ends if {
	strings.render_template("{{range 100000000000}}{{end}}", {}) == ""
	v1.decision == {"findings": []}
}
