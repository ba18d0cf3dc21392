package tfe_test

import (
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/cairnhq/cairn/api/apitest"
)

// freezeDirs makes the directories unable to lose entries, so every object
// delete of a real directory blob store fails: the immutable attribute for
// a root test (root ignores permission bits), read-only permissions
// otherwise. The returned function undoes it.
func freezeDirs(t *testing.T, dirs []string) func() {
	t.Helper()
	if os.Geteuid() == 0 {
		for _, d := range dirs {
			if out, err := exec.Command("chattr", "+i", d).CombinedOutput(); err != nil {
				t.Skipf("chattr +i %s (needs CAP_LINUX_IMMUTABLE and a file system with the attribute): %v: %s", d, err, out)
			}
		}
		return func() {
			for _, d := range dirs {
				_ = exec.Command("chattr", "-i", d).Run()
			}
		}
	}
	for _, d := range dirs {
		if err := os.Chmod(d, 0o555); err != nil {
			t.Fatal(err)
		}
	}
	return func() {
		for _, d := range dirs {
			_ = os.Chmod(d, 0o755)
		}
	}
}

// TestArtifactDeletionRemovesTheReferenceBeforeTheObject: deleting a
// workspace whose state and configuration objects cannot be deleted (the
// directory blob store refuses every unlink) still succeeds and leaves
// no row referring to them, only orphaned objects for the sweep: the
// reference goes first, in its own transaction, never a dangling
// reference to a missing object (SPEC §8).
func TestArtifactDeletionRemovesTheReferenceBeforeTheObject(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := newCloudUser(t, env, "Deleter")
	wsID := u.uploadedWorkspace(t, "doomed")
	svID := u.publishState(t, wsID, 1, []byte(`{"version":4,"terraform_version":"1.10.6","serial":1,"lineage":"lin-1","outputs":{},"resources":[],"check_results":null}`))

	blobs := filepath.Join(env.Config.DataDir, "blobs")
	var objects []string
	dirs := map[string]bool{}
	err := filepath.WalkDir(blobs, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			objects = append(objects, p)
			dirs[filepath.Dir(p)] = true
		}
		return err
	})
	if err != nil || len(objects) < 2 {
		t.Fatalf("objects of the workspace's configuration and state: %v %v", objects, err)
	}
	var frozen []string
	for d := range dirs {
		frozen = append(frozen, d)
	}
	thaw := freezeDirs(t, frozen)
	defer thaw()
	// The store really refuses deletes: the premise of the test.
	if err := os.Remove(objects[0]); err == nil {
		t.Fatalf("removed %s from a frozen directory", objects[0])
	}

	u.call(t, http.MethodDelete, "/api/v2/organizations/"+u.org+"/workspaces/doomed", nil).MustStatus(t, http.StatusNoContent)

	for table, column := range map[string]string{"state_versions": "workspace_id", "configuration_versions": "workspace_id", "workspaces": "id"} {
		var n int
		if err := env.DB.Get(&n, `SELECT count(*) FROM `+table+` WHERE `+column+` = $1`, wsID); err != nil || n != 0 {
			t.Errorf("%s still refers to the deleted workspace: %d rows (%v)", table, n, err)
		}
	}
	if r := u.call(t, http.MethodGet, "/api/v2/state-versions/"+svID, nil); r.Status != http.StatusNotFound {
		t.Errorf("state version of the deleted workspace: %d", r.Status)
	}
	for _, p := range objects {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("object %s: %v, want it left as an orphan", p, err)
		}
	}
}
