package sweep_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/platform/blob"
	"github.com/cairnhq/cairn/api/platform/blobtest"
	"github.com/cairnhq/cairn/api/platform/config"
	"github.com/cairnhq/cairn/api/policy/policytest"
	"github.com/cairnhq/cairn/api/sweep"
	"github.com/cairnhq/cairn/e2e/devstack"
)

func TestCairnShapedKeys(t *testing.T) {
	t.Parallel()
	for key, want := range map[string]bool{
		blob.Key("state", "org_a", "ws_b", "sv_c-obj_d.tfstate"):     true,
		blob.Key("runs", "org_a", "run_b", "plan_file", "obj_c"):     true,
		blob.Key("policy-sources", "org_a", "obj_b"):                 true,
		blob.Key("configuration-versions", "org_a", "cv_b", "obj_c"): true,
		blob.Key("policy-versions", "org_a", "pv_b", "obj_c"):        true,
		"state/org_a":                            false,
		"backups/org_a/obj_b":                    false,
		"state/org_a/Weird Name":                 false,
		"state//obj":                             false,
		"other-team/state/org_a/ws_b/sv.tfstate": false,
	} {
		if got := sweep.CairnShaped(key); got != want {
			t.Errorf("CairnShaped(%q) = %v, want %v", key, got, want)
		}
	}
}

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

// TestSweepDeletesOnlyOldUnreferencedCairnObjects runs the sweep over the
// directory store and a real S3 server: a referenced policy source, a
// foreign object and orphans (more than a page) are in the store; before
// the minimum age nothing goes, after it only the orphans go.
func TestSweepDeletesOnlyOldUnreferencedCairnObjects(t *testing.T) {
	t.Parallel()
	stores := map[string]apitest.Option{"directory": func(*apitest.Settings) {}}
	srv := blobtest.S3(t)
	_, storeURL := srv.Bucket(t)
	stores["s3"] = func(s *apitest.Settings) {
		s.Config.BlobURL = storeURL
		s.Config.S3AccessKeyID = srv.Creds.AccessKeyID
		s.Config.S3SecretAccessKey = config.Secret(srv.Creds.SecretAccessKey)
	}
	for name, option := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			env := apitest.New(t, option)
			f := policytest.New(t, env, "sweep")
			var set struct{ ID string }
			f.User.Mutate(http.MethodPost, "/v1/policy-sets", map[string]string{"name": "kept"}).MustStatus(t, http.StatusCreated).Data(t, &set)
			var v struct {
				ID string `json:"id"`
			}
			f.User.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/workspaces/" + f.WorkspaceID + "/policy-sets/" + set.ID + "/versions",
				Body: archive(t), Header: map[string]string{"Content-Type": "application/gzip", "Idempotency-Key": apitest.NewKey()}}).
				MustStatus(t, http.StatusAccepted).Data(t, &v)
			var referenced string
			if err := env.DB.Get(&referenced, `SELECT blob_key FROM policy_artifacts WHERE policy_version_id = $1`, v.ID); err != nil {
				t.Fatal(err)
			}

			blobs := env.Server.Blobs()
			ctx := context.Background()
			put := func(key string) {
				t.Helper()
				if _, err := blobs.Put(ctx, key, key, bytes.NewReader([]byte("orphan")), 100); err != nil {
					t.Fatal(err)
				}
			}
			var orphans []string
			for i := range 12 {
				k := blob.Key("state", "org_gone", "ws_gone", fmt.Sprintf("sv_%d-obj_x.tfstate", i))
				orphans = append(orphans, k)
				put(k)
			}
			foreign := "backups/nightly.tar"
			put(foreign)

			c := &clock{now: time.Now()}
			sweeper := sweep.NewService(env.DB, blobs, sweep.Options{MinAge: time.Hour, PageSize: 5}).WithClock(c.Now)
			r, err := sweeper.Sweep(ctx)
			if err != nil || r.Deleted != 0 || r.Listed != 14 || r.Pages < 3 {
				t.Fatalf("young sweep: %+v %v", r, err)
			}
			c.mu.Lock()
			c.now = c.now.Add(2 * time.Hour)
			c.mu.Unlock()
			r, err = sweeper.Sweep(ctx)
			if err != nil || r.Deleted != len(orphans) || r.Foreign != 1 || r.Kept != 1 {
				t.Fatalf("old sweep: %+v %v", r, err)
			}
			for _, k := range orphans {
				if _, err := blobs.Open(ctx, k, k); err == nil {
					t.Fatalf("orphan %s survived", k)
				}
			}
			for _, k := range []string{referenced, foreign} {
				if _, err := blobs.Open(ctx, k, "x"); errors.Is(err, blob.ErrNotFound) {
					t.Fatalf("%s was deleted", k)
				}
			}
			if r, err := sweeper.Sweep(ctx); err != nil || r.Deleted != 0 {
				t.Fatalf("second old sweep: %+v %v", r, err)
			}
		})
	}
}

func archive(t *testing.T) []byte {
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
	return devstack.TarGz(files)
}
