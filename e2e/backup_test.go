package e2e

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	_ "github.com/lib/pq"

	"github.com/cairnhq/cairn/e2e/devstack"
)

// TestBackupMidActivityRestores follows docs/operating/backup-and-restore.md
// on a busy installation: one run has applied, one waits for approval, one
// is in the middle of its apply and one was just queued when pg_dump takes
// the database, and the blob store is copied after the dump. The dump is
// restored into a fresh cluster and the copy into a fresh data directory,
// and a new API and worker start on them. Every state version, plan
// artifact and configuration archive the restored database references must
// read back with its recorded digest; the apply the backup caught midway
// must go to recovery, never be run again; the queued run and the one
// waiting for approval must go on to apply on the restore.
func TestBackupMidActivityRestores(t *testing.T) {
	t.Parallel()
	src := runsStack(t)
	m := src.newMember(t, "backup")
	ctx := context.Background()

	// Applied: a state version and its plan artifacts.
	appliedWS := src.createWorkspace(t, m, "backup-applied", "us")
	cfg := src.uploadConfiguration(t, m, appliedWS, map[string]string{"main.tf": `resource "terraform_data" "kept" {
  input = "before-the-backup"
}`})
	_, applied := src.createRun(t, m, appliedWS, cfg, "plan_and_apply")
	applied = src.waitRun(t, m, applied.ID, 3*time.Minute, status("awaiting_approval"))
	if st := src.apiJSON(t, http.MethodPost, "/v1/runs/"+applied.ID+"/actions/approve", applied.binding(), nil, m.mutate(uniqueKey("approve"))...); st != http.StatusOK {
		t.Fatalf("approve: %d", st)
	}
	applied = src.waitRun(t, m, applied.ID, 3*time.Minute, status("applied", "errored", "recovery_required"))
	if applied.Status != "applied" {
		t.Fatalf("first run ended %s", applied.Status)
	}
	// Waiting for approval: a plan artifact and a configuration archive
	// the restore will need to apply.
	waitingWS := src.createWorkspace(t, m, "backup-waiting", "us")
	cfg = src.uploadConfiguration(t, m, waitingWS, map[string]string{"main.tf": `resource "terraform_data" "later" {
  input = "approved-after-the-restore"
}`})
	_, waiting := src.createRun(t, m, waitingWS, cfg, "plan_and_apply")
	waiting = src.waitRun(t, m, waiting.ID, 3*time.Minute, status("awaiting_approval"))
	// Applying: provisioning its second resource when the dump starts.
	_, midway := src.applyingMidway(t, m, "backup-midway", 187)
	// Queued: created just before the dump, its plan not yet finished.
	queuedWS := src.createWorkspace(t, m, "backup-queued", "us")
	cfg = src.uploadConfiguration(t, m, queuedWS, map[string]string{"main.tf": `resource "terraform_data" "queued" {
  input = "planned-on-the-restore"
}`})
	_, queued := src.createRun(t, m, queuedWS, cfg, "plan_and_apply")

	// The backup: the database first, then the blob store.
	backupDir := t.TempDir()
	dump := filepath.Join(backupDir, "cairn.dump")
	bin, err := devstack.FindBinDir()
	if err != nil {
		t.Fatal(err)
	}
	dumpStart := time.Now()
	if out, err := exec.Command(filepath.Join(bin, "pg_dump"), "--format=custom", "--no-owner", "--no-privileges",
		"--file="+dump, "--dbname="+src.DatabaseURL).CombinedOutput(); err != nil {
		t.Fatalf("pg_dump: %v\n%s", err, out)
	}
	dumped := time.Since(dumpStart)
	restoredData, err := os.MkdirTemp("", "cairn-restore-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(restoredData) })
	copyStart := time.Now()
	copied, err := copyTree(filepath.Join(src.DataDir, "blobs"), filepath.Join(restoredData, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("backup mid-activity: pg_dump %s, blob copy %s (%d objects)", dumped.Round(time.Millisecond),
		time.Since(copyStart).Round(time.Millisecond), copied)
	if r := src.readRun(t, m, midway.ID); r.Status != "applying" {
		t.Fatalf("the backup was to catch the apply midway, but the run is %s", r.Status)
	}

	// The machine is lost with everything on it, the apply's sandbox too.
	for _, name := range []string{"api", "worker", "bff", "mcp"} {
		src.killProcess(t, name)
	}
	for i := 0; ; i++ {
		out, _ := exec.Command("pgrep", "-f", "sleep 187").Output()
		if len(out) == 0 {
			break
		}
		if i == 100 {
			t.Fatalf("the lost machine's apply outlived its worker: %s", out)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// The restore: a fresh cluster and data directory, then the processes.
	_, restoredURL := emptyCluster(t)
	if out, err := exec.Command(filepath.Join(bin, "pg_restore"), "--no-owner", "--no-privileges", "--exit-on-error",
		"--dbname="+restoredURL, dump).CombinedOutput(); err != nil {
		t.Fatalf("pg_restore: %v\n%s", err, out)
	}
	conn, err := sqlx.Connect("postgres", restoredURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The digests first, before anything runs on the restore.
	store := openDirStore(t, filepath.Join(restoredData, "blobs"))
	verified, problems := verifyDigests(ctx, conn, store)
	for _, p := range problems {
		t.Error(p)
	}
	if verified["state_version"] < 1 || verified["run_artifact.plan_file"] < 3 || verified["configuration_version"] < 4 {
		t.Errorf("the restore references too little to have made the case: %v", verified)
	}
	t.Logf("verified on the restore before it started: %v", verified)

	// The replacement machine: the same public name, port and certificate
	// (a plan made before the backup names the API it was made against),
	// the restored database and blob store.
	dst := &Stack{APIURL: src.APIURL, APIHost: src.APIHost, DashboardURL: src.DashboardURL, MCPURL: src.MCPURL,
		DatabaseURL: restoredURL, DataDir: restoredData, WorkerHealthURL: src.WorkerHealthURL, TLS: src.TLS, Client: src.Client,
		Env:  append(append(slices.Clone(src.Env), "DATABASE_URL="+restoredURL, "CAIRN_DATA_DIR="+restoredData), drillEnv...),
		logs: &syncBuffer{}, bin: src.bin}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("restored processes' logs:\n%s", dst.Logs())
		}
	})
	for _, p := range []struct{ name, bin string }{{"api", "cairn-api"}, {"worker", "cairn-worker"}, {"bff", "cairn-bff"}, {"mcp", "cairn-mcp"}} {
		dst.startProcess(t, p.name, p.bin)
	}
	for _, u := range []string{dst.APIURL + "/health", dst.DashboardURL + "/health", dst.MCPURL + "/health"} {
		waitFor(t, dst.Client, u)
	}

	// The apply the backup caught midway: its attempt was running on a
	// worker the restore does not have; it goes to recovery.
	rec := dst.waitRun(t, m, midway.ID, 2*time.Minute, status("recovery_required", "applied", "errored"))
	if rec.Status != "recovery_required" || rec.attemptsOf("apply") != 1 {
		t.Errorf("the apply interrupted by the backup ended %s with %d apply attempts", rec.Status, rec.attemptsOf("apply"))
	}
	// The run waiting for approval applies from its restored plan.
	waiting = dst.readRun(t, m, waiting.ID)
	if st := dst.apiJSON(t, http.MethodPost, "/v1/runs/"+waiting.ID+"/actions/approve", waiting.binding(), nil, m.mutate(uniqueKey("approve"))...); st != http.StatusOK {
		t.Fatalf("approve on the restore: %d", st)
	}
	waiting = dst.waitRun(t, m, waiting.ID, 3*time.Minute, status("applied", "errored", "recovery_required"))
	if waiting.Status != "applied" {
		t.Errorf("the run approved on the restore ended %s:\n%s", waiting.Status, dst.logsOf(t, m, waiting.ID))
	}
	// The run queued at the backup plans on the restore.
	queued = dst.waitRun(t, m, queued.ID, 3*time.Minute, status("awaiting_approval", "errored", "planned_and_finished"))
	if queued.Status != "awaiting_approval" {
		t.Errorf("the run queued at the backup ended %s on the restore", queued.Status)
	}
	// The state applied before the backup reads back through the API.
	if id, _, state := dst.currentState(t, m, appliedWS); id == "" || id != deref(applied.Apply.StateVersionID) ||
		!strings.Contains(state, "before-the-backup") {
		t.Errorf("the state applied before the backup on the restore: %s (run published %s)", id, deref(applied.Apply.StateVersionID))
	}

	// The jobs the dump shows running, on workers that are gone, are
	// rescued; nothing stays held.
	for _, p := range waitQuiet(ctx, conn, drillRescueAfter+60*time.Second) {
		t.Error(p)
	}
	// And everything the restore wrote since verifies too.
	verified, problems = verifyDigests(ctx, conn, openDirStore(t, filepath.Join(restoredData, "blobs")))
	for _, p := range problems {
		t.Error(p)
	}
	for _, p := range checkAuditPairs(ctx, conn) {
		t.Error(p)
	}
	t.Logf("verified on the restore after it ran: %v", verified)
}

// copyTree copies the regular files under src to the same paths under dst
// and returns how many it copied. A file that disappears meanwhile (an
// upload's temporary file) is skipped: a copy of a live store is taken
// while it changes.
func copyTree(src, dst string) (int, error) {
	n := 0
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o700)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		in, err := os.Open(path)
		if os.IsNotExist(err) {
			return nil
		}
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return fmt.Errorf("copying %s: %w", rel, err)
		}
		n++
		return out.Close()
	})
	return n, err
}
