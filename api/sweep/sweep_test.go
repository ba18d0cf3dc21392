package sweep_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/platform/blobkey"
	"github.com/cairnhq/cairn/api/platform/blobtest"
	"github.com/cairnhq/cairn/api/platform/config"
	"github.com/cairnhq/cairn/api/platform/id"
	"github.com/cairnhq/cairn/api/policy/policytest"
	"github.com/cairnhq/cairn/api/run"
	"github.com/cairnhq/cairn/api/sweep"
	"github.com/cairnhq/cairn/e2e/devstack"
)

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *clock) Advance(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.now = c.now.Add(d) }

// storage is one kind of blob store a test server can use, with a way
// behind its back to the bucket or directory it shares.
type storage struct {
	option  apitest.Option
	objects func(env *apitest.Env) blobtest.Objects
	// leavesPartialFiles: a killed write leaves "<key>.<hex>.tmp".
	leavesPartialFiles bool
}

// storages returns the directory store and a fresh bucket on the test S3
// server.
func storages(t *testing.T) map[string]storage {
	t.Helper()
	srv := blobtest.S3(t)
	bucket, storeURL := srv.Bucket(t)
	return map[string]storage{
		"directory": {
			option: func(*apitest.Settings) {},
			objects: func(env *apitest.Env) blobtest.Objects {
				return blobtest.Dir(filepath.Join(env.Config.DataDir, "blobs"))
			},
			leavesPartialFiles: true,
		},
		"s3": {
			option: func(s *apitest.Settings) {
				s.Config.BlobURL = storeURL
				s.Config.S3AccessKeyID = srv.Creds.AccessKeyID
				s.Config.S3SecretAccessKey = config.Secret(srv.Creds.SecretAccessKey)
			},
			objects: func(*apitest.Env) blobtest.Objects { return srv.Objects(bucket) },
		},
	}
}

// TestSweepDeletesOnlyCairnsOrphans runs the sweep over the directory
// store and a real S3 server, without and with CAIRN_BLOB_PREFIX. The
// store holds objects Cairn's services wrote and rows reference, orphans
// Cairn wrote (more than a page, one per layout), and other tools' objects
// planted beside them, look-alikes under Cairn's own roots among them.
// Before the minimum age nothing goes; after it only the orphans go, and
// every foreign object is unchanged byte for byte. With a prefix, Cairn's
// writes land under it and objects outside it survive even when they are
// exactly Cairn-shaped.
func TestSweepDeletesOnlyCairnsOrphans(t *testing.T) {
	t.Parallel()
	for _, prefix := range []string{"", "shared/cairn"} {
		for name, store := range storages(t) {
			t.Run(name+"/prefix="+prefix, func(t *testing.T) {
				t.Parallel()
				sweepSharedStore(t, store, prefix)
			})
		}
	}
}

func sweepSharedStore(t *testing.T, store storage, prefix string) {
	env := apitest.New(t, store.option, func(s *apitest.Settings) { s.Config.BlobPrefix = prefix })
	raw := store.objects(env)
	// full is where a key Cairn speaks of lives in the bucket.
	full := func(key string) string {
		if prefix == "" {
			return key
		}
		return prefix + "/" + key
	}
	ctx := context.Background()

	// Referenced: a published policy version (its source, bundle and test
	// results) and the configuration of a started plan.
	f := policytest.New(t, env, "sweep")
	f.Publish(t, "kept", policyFiles(t))
	st := f.StartPlan(t)
	org, ws, runID := st.Run.OrganizationID, st.Run.WorkspaceID, st.Run.ID
	var referenced []string
	if err := env.DB.Select(&referenced, `SELECT blob_key FROM policy_artifacts
		UNION ALL SELECT blob_key FROM configuration_versions WHERE blob_key IS NOT NULL`); err != nil {
		t.Fatal(err)
	}
	if len(referenced) != 4 {
		t.Fatalf("referenced objects %q, want a policy source, bundle, test results and a configuration", referenced)
	}

	// Orphans: what the services wrote for rows that never committed (an
	// artifact of every kind, a staged archive), and an object of every
	// other layout.
	var orphans []string
	runs := env.Server.Services().Runs
	for _, kind := range []string{run.ArtifactPlanFile, run.ArtifactPlanJSON, run.ArtifactPlanDiff, run.ArtifactEmergencyState} {
		a, err := runs.StoreArtifact(ctx, st, kind, strings.NewReader("uncommitted "+kind), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		orphans = append(orphans, a.BlobKey)
	}
	staged, err := runs.StageArchive(ctx, org, bytes.NewReader(devstack.TarGz(map[string]string{"main.tf": "# never committed\n"})))
	if err != nil {
		t.Fatal(err)
	}
	orphans = append(orphans, staged.Key)
	blobs := env.Server.Blobs()
	for _, key := range []string{blobkey.State(org, ws, id.New("sv")), blobkey.StateJSON(org, ws, id.New("sv")),
		blobkey.RunLogSegment(org, runID, id.New("logseg")), blobkey.PolicySource(org), blobkey.PolicyArtifact(org, id.New("pol")),
		blobkey.State(id.New("org"), id.New("ws"), id.New("sv"))} {
		if _, err := blobs.Put(ctx, key, key, strings.NewReader("orphan"), 100); err != nil {
			t.Fatal(err)
		}
		orphans = append(orphans, key)
	}

	// What a killed directory write of an orphan left: Cairn's there, a
	// look-alike anywhere else.
	partial := blobkey.State(org, ws, id.New("sv")) + ".18f0c2a4b5d6e7f8.tmp"

	// Other tools' objects where Cairn lists.
	obj := id.New("obj")
	foreign := []string{
		"state/prod/terraform.tfstate",
		"runs/2024-06/report.csv",
		"backups/nightly.tar",
		"state/" + org + "/" + ws + "/terraform.tfstate",
		"state/" + org + "/" + ws + "/" + id.New("sv") + ".tfstate",
		"runs/" + org + "/" + runID + "/report/" + obj,
		"runs/" + org + "/" + runID + "/log/" + obj,
		"policy-sources/" + org + "/" + obj + ".bak",
		"policy-sources/" + org + "/" + obj[:len(obj)-1],
		"policy-sources/" + strings.ToUpper(org) + "/" + obj,
		"configuration-versions/" + org + "/" + id.New("cfg") + "/" + obj + "/extra",
		"state/prod/terraform.tfstate.18f0c2a4b5d6e7f8.tmp",
		blobkey.PolicySource(org) + ".18f0zz.tmp",
	}
	var partials []string
	if store.leavesPartialFiles {
		partials = append(partials, partial)
	} else {
		foreign = append(foreign, partial)
	}
	// And, with a prefix, Cairn-shaped objects beside it.
	var outside []string
	if prefix != "" {
		outside = []string{blobkey.State(org, ws, id.New("sv")), blobkey.PolicySource(org),
			"shared/" + blobkey.PolicySource(org), "shared/cairn-old/" + blobkey.PolicySource(org)}
	}
	planted := func(key string) []byte { return []byte("another tool's " + key) }
	for _, k := range append(foreign, partials...) {
		raw.Put(t, full(k), planted(k))
	}
	for _, k := range outside {
		raw.Put(t, k, planted(k))
	}

	for _, k := range append(referenced, orphans...) {
		if !blobkey.Recognised(k) {
			t.Errorf("Cairn wrote %q, which its sweep does not recognise", k)
		}
		if _, ok := raw.Get(t, full(k)); !ok {
			t.Errorf("%s is not at %s", k, full(k))
		}
		if _, ok := raw.Get(t, k); prefix != "" && ok {
			t.Errorf("%s was written outside the prefix", k)
		}
	}

	c := &clock{now: time.Now()}
	sweeper := sweep.NewService(env.DB, blobs, sweep.Options{MinAge: time.Hour, PageSize: 5}).WithClock(c.Now)
	listed := len(referenced) + len(orphans) + len(partials) + len(foreign)
	r, err := sweeper.Sweep(ctx)
	if err != nil || r.Deleted != 0 || r.Listed != listed || r.Foreign != len(foreign) || r.Pages < 3 {
		t.Fatalf("young sweep: %+v %v, want %d listed, %d foreign", r, err, listed, len(foreign))
	}
	c.Advance(2 * time.Hour)
	r, err = sweeper.Sweep(ctx)
	if err != nil || r.Deleted != len(orphans)+len(partials) || r.Foreign != len(foreign) || r.Kept != len(referenced) {
		t.Fatalf("old sweep: %+v %v, want %d deleted, %d foreign, %d kept", r, err, len(orphans)+len(partials), len(foreign), len(referenced))
	}
	for _, k := range append(orphans, partials...) {
		if _, ok := raw.Get(t, full(k)); ok {
			t.Errorf("orphan %s survived", k)
		}
	}
	for _, k := range referenced {
		if _, ok := raw.Get(t, full(k)); !ok {
			t.Errorf("referenced %s was deleted", k)
		}
	}
	for _, k := range foreign {
		if b, ok := raw.Get(t, full(k)); !ok || !bytes.Equal(b, planted(k)) {
			t.Errorf("foreign %s: %q, present %v", k, b, ok)
		}
	}
	for _, k := range outside {
		if b, ok := raw.Get(t, k); !ok || !bytes.Equal(b, planted(k)) {
			t.Errorf("%s outside the prefix: %q, present %v", k, b, ok)
		}
	}
	if r, err := sweeper.Sweep(ctx); err != nil || r.Deleted != 0 {
		t.Fatalf("second old sweep: %+v %v", r, err)
	}
}

func policyFiles(t *testing.T) map[string]string {
	t.Helper()
	dir := "../../e2e/testdata/policies/always-pass"
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = string(b)
	}
	return files
}
