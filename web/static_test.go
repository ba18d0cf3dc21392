package web

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"
	"testing"
)

var updateStatic = flag.Bool("update", false, "record new static files in static.sha256")

// manifestPath lists every static file with the digest it was first served
// under.
const manifestPath = "static.sha256"

// TestStaticFilesChangeOnlyUnderANewName: the dashboard serves static files
// as immutable for a year, so a browser that once fetched cairn-3.js never
// asks again. Changing a file's bytes under the same name would leave
// returning users on the old script with new pages; the test fails until
// the file gets a new name (and the templates the new URL). -update records
// new files and drops removed ones; it never accepts changed bytes.
func TestStaticFilesChangeOnlyUnderANewName(t *testing.T) {
	recorded := map[string]string{}
	if f, err := os.Open(manifestPath); err == nil {
		scanner := bufio.NewScanner(f)
		for scanner.Scan() {
			digest, name, ok := strings.Cut(scanner.Text(), "  ")
			if ok {
				recorded[name] = digest
			}
		}
		f.Close()
		if err := scanner.Err(); err != nil {
			t.Fatal(err)
		}
	} else if !os.IsNotExist(err) {
		t.Fatal(err)
	}
	current := map[string]string{}
	err := fs.WalkDir(Static, "static", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := fs.ReadFile(Static, path)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		current[strings.TrimPrefix(path, "static/")] = hex.EncodeToString(sum[:])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, digest := range current {
		if was, ok := recorded[name]; ok && was != digest {
			t.Errorf("web/static/%s changed under the same name: browsers keep the old one for a year; "+
				"give it a new name (cairn-N+1) and point the templates at it", name)
		}
	}
	var missing []string
	for name := range current {
		if _, ok := recorded[name]; !ok {
			missing = append(missing, name)
		}
	}
	for name := range recorded {
		if _, ok := current[name]; !ok {
			missing = append(missing, "(removed) "+name)
		}
	}
	sort.Strings(missing)
	if len(missing) == 0 || t.Failed() {
		return
	}
	if !*updateStatic {
		t.Fatalf("%s is out of date (%s): go test ./web -update", manifestPath, strings.Join(missing, ", "))
	}
	names := make([]string, 0, len(current))
	for name := range current {
		names = append(names, name)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, name := range names {
		fmt.Fprintf(&b, "%s  %s\n", current[name], name)
	}
	if err := os.WriteFile(manifestPath, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}
