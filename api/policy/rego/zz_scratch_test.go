package rego_test

import "testing"

func TestZZAnnotationSchema(t *testing.T) {
	b := build(t, map[string]string{"p.rego": `package cairn.v1

# METADATA
# schemas:
#   - input: {"$ref": "file:///nonexistent/schema.json"}
decision := {"findings": []} if input.x
`})
	t.Log(b.err)
}
