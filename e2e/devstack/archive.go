package devstack

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"sort"
)

// TarGz packs configuration files, given by path and content, into a
// .tar.gz as a client uploads it. Paths are written in sorted order so equal
// inputs give equal archives.
func TarGz(files map[string]string) []byte {
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, name := range names {
		body := files[name]
		// Writes to a bytes.Buffer cannot fail.
		_ = tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg})
		_, _ = tw.Write([]byte(body))
	}
	_ = tw.Close()
	_ = gz.Close()
	return buf.Bytes()
}
