// Package registrytest builds module archives for tests of the registry
// and of what consumes it: well-formed ones from a set of files, and ones
// that break the archive rules.
package registrytest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"maps"
	"slices"
	"testing"
)

// Entry is one tar entry; Typeflag 0 is a regular file.
type Entry struct {
	Name     string
	Body     string
	Typeflag byte
	Linkname string
}

// Archive is a gzip-compressed tar of files (name → content), in name
// order, so equal files give equal bytes.
func Archive(t testing.TB, files map[string]string) []byte {
	t.Helper()
	entries := make([]Entry, 0, len(files))
	for _, name := range slices.Sorted(maps.Keys(files)) {
		entries = append(entries, Entry{Name: name, Body: files[name]})
	}
	return ArchiveOf(t, entries...)
}

// ArchiveOf is a gzip-compressed tar of the entries as given.
func ArchiveOf(t testing.TB, entries ...Entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.Name, Mode: 0o644, Typeflag: e.Typeflag, Linkname: e.Linkname}
		if e.Typeflag == 0 {
			hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(e.Body))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if hdr.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(e.Body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// ModuleFiles is a small module with a README, an input with a default, a
// required input, a sensitive output, a managed resource and a submodule
// under modules/sub; it uses no provider (terraform_data is built in), so
// tofu plans and applies it anywhere. marker ends up in an output.
func ModuleFiles(marker string) map[string]string {
	return map[string]string{
		"README.md": "# Network\n\nMakes a network. <script>alert(1)</script>\n",
		"main.tf": `variable "cidr" {
  type        = string
  description = "The network's range."
  default     = "10.0.0.0/16"
}

variable "name" {
  type = string
}

resource "terraform_data" "network" {
  input = "${var.name}:${var.cidr}:` + marker + `"
}

output "id" {
  value     = terraform_data.network.id
  sensitive = true
}

output "marker" {
  description = "What version this is."
  value       = "` + marker + `"
}
`,
		"modules/sub/main.tf": `variable "size" {
  type    = number
  default = 3
}

resource "terraform_data" "sub" {
  input = var.size
}

output "size" {
  value = var.size
}
`,
	}
}
