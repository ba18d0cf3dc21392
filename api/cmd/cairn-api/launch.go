package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/user"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/launch"
	"github.com/cairnhq/cairn/api/platform/config"
)

const launchUsage = `usage: cairn-api launch <command> [flags]

commands:
  show                                     print the control in force
  apply -file F -expected-version N -reason R [-key K]
                                           write a new control version
  open-gate -reason R [-key K]             open the public gate (a new version
                                           of the control in force, or of the
                                           default control when none exists)
  suspensions -organization SLUG [-workspace ID]
                                           print a suspension's version and history
  suspend -organization SLUG [-workspace ID] -expected-version N -reason R [-key K]
  lift -organization SLUG [-workspace ID] -expected-version N -reason R [-key K]

While the public gate is closed only the exact organization-and-workspace
pairs of canary_allowlist are admitted. Every change needs a reason and is
recorded with actor, request, reason and the state before and after; a
suspension's expected version is the one "suspensions" prints (0 before its
first change). -key makes a retry safe; it defaults to a random key, printed
so the same change can be retried.
`

func operatorActor() string {
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	return "cli:" + name
}

func randomKey() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "cli-" + hex.EncodeToString(b)
}

func launchCommand(ctx context.Context, cfg config.Config, logger *slog.Logger, args []string, out io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(out, launchUsage)
		return errors.New("a launch command is required")
	}
	conn, err := requireDatabase(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close()
	svc := launch.NewService(conn, logger)
	fs := flag.NewFlagSet("launch "+args[0], flag.ContinueOnError)
	file := fs.String("file", "", "control document (JSON)")
	expected := fs.Int("expected-version", -1, "version the change replaces")
	reason := fs.String("reason", "", "why (1-500 characters)")
	key := fs.String("key", "", "idempotency key (default: random)")
	orgSlug := fs.String("organization", "", "organization slug")
	workspaceID := fs.String("workspace", "", "workspace ID (suspend one workspace)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *key == "" {
		*key = randomKey()
	}
	requestID := "cli-" + *key
	switch args[0] {
	case "show":
		current, err := svc.Current(ctx)
		if err != nil {
			return err
		}
		if current == nil {
			fmt.Fprintln(out, "no launch control exists: every admission is refused")
			return nil
		}
		return printControl(out, *current)
	case "apply":
		raw, err := os.ReadFile(*file)
		if err != nil {
			return err
		}
		doc, err := launch.Parse(raw)
		if err != nil {
			return err
		}
		if *expected < 0 {
			return errors.New("-expected-version is required (0 when no control exists)")
		}
		c, replayed, err := svc.Apply(ctx, launch.Change{Actor: operatorActor(), RequestID: requestID, IdempotencyKey: *key,
			ExpectedVersion: *expected, Reason: *reason, Document: doc})
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "launch control version %d written (key %s, replayed %v)\n", c.Version, *key, replayed)
		return nil
	case "open-gate":
		c, replayed, err := openPublicGate(ctx, svc, *reason, *key, operatorActor())
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "public gate open: launch control version %d (key %s, replayed %v)\n", c.Version, *key, replayed)
		return nil
	case "suspensions":
		orgID, err := organizationID(ctx, conn, *orgSlug)
		if err != nil {
			return err
		}
		state, err := svc.Suspensions(ctx, orgID, *workspaceID)
		if err != nil {
			return err
		}
		doc, err := json.MarshalIndent(state, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%s\n", doc)
		return nil
	case "suspend", "lift":
		orgID, err := organizationID(ctx, conn, *orgSlug)
		if err != nil {
			return err
		}
		if *expected < 0 {
			return errors.New(`-expected-version is required: the version "suspensions" prints (0 before the first change)`)
		}
		change := svc.Suspend
		if args[0] == "lift" {
			change = svc.Lift
		}
		rec, replayed, err := change(ctx, launch.SuspensionChange{Actor: operatorActor(), RequestID: requestID, IdempotencyKey: *key,
			OrganizationID: orgID, WorkspaceID: *workspaceID, ExpectedVersion: *expected, Reason: *reason})
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "suspension version %d recorded: suspended %v (change %s, key %s, replayed %v)\n",
			rec.Version, rec.Suspended, rec.ID, *key, replayed)
		return nil
	default:
		fmt.Fprint(out, launchUsage)
		return fmt.Errorf("unknown launch command %q", args[0])
	}
}

func printControl(out io.Writer, c launch.Control) error {
	doc, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "version %d\n%s\n", c.Version, doc)
	return nil
}

func organizationID(ctx context.Context, conn *sqlx.DB, slug string) (string, error) {
	var id string
	if err := conn.GetContext(ctx, &id, `SELECT id FROM organizations WHERE slug = $1`, slug); err != nil {
		return "", fmt.Errorf("organization %q not found", slug)
	}
	return id, nil
}

// openPublicGate writes a version of the control in force with the public
// gate open, starting from the default control when none exists yet. A
// retry under the same key names the version that change replaced, so it
// replays the first answer rather than conflicting with its own result.
func openPublicGate(ctx context.Context, svc *launch.Service, reason, key, actor string) (launch.Control, bool, error) {
	base, err := svc.ChangeByKey(ctx, key)
	if err != nil {
		return launch.Control{}, false, err
	}
	expected := 0
	if base != nil {
		expected = base.Version - 1
	} else if base, err = svc.Current(ctx); err != nil {
		return launch.Control{}, false, err
	} else if base != nil {
		expected = base.Version
	}
	doc := launch.Default()
	if base != nil {
		doc = *base
	}
	doc.PublicGate = true
	return svc.Apply(ctx, launch.Change{Actor: actor, RequestID: "cli-" + key, IdempotencyKey: key,
		ExpectedVersion: expected, Reason: reason, Document: doc})
}
