package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/platform/db"

	"github.com/cairnhq/cairn/api/assembly/domain"
	"github.com/cairnhq/cairn/api/identity"
	"github.com/cairnhq/cairn/api/launch"
	"github.com/cairnhq/cairn/api/platform/config"
)

// The local installation's first account and organization.
const (
	bootstrapEmail   = "owner@cairn.localhost"
	bootstrapName    = "Local Owner"
	bootstrapOrgName = "Local"
	bootstrapOrgSlug = "local"
)

// bootstrap creates the local owner and organization on first run. The
// generated password is printed once and written once to a 0600 file; later
// runs only say where it is.
func bootstrap(ctx context.Context, cfg config.Config, logger *slog.Logger, out io.Writer) error {
	if !cfg.AuthReady() {
		return errors.New("bootstrap needs AUTH_SECRET")
	}
	conn, err := requireDatabase(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close()
	ident, err := identity.NewService(conn, domain.IdentityOptions(cfg))
	if err != nil {
		return err
	}
	credentialsPath := filepath.Join(cfg.DataDir, "dev-credentials")
	pw := make([]byte, 18)
	if _, err := rand.Read(pw); err != nil {
		return err
	}
	password := base64.RawURLEncoding.EncodeToString(pw)
	res, err := ident.Bootstrap(ctx, bootstrapEmail, bootstrapName, password, bootstrapOrgName, bootstrapOrgSlug)
	if err != nil {
		return fmt.Errorf("creating the local owner: %w", err)
	}
	if err := reportLaunch(ctx, launch.NewService(conn, logger), out); err != nil {
		return err
	}
	if err := writeCLIConfig(ctx, cfg, conn, ident, res, out); err != nil {
		return err
	}
	if !res.Created {
		fmt.Fprintf(out, "==> local owner %s already exists (organization %q); its password is in %s\n",
			res.User.Email, res.Organization.Slug, credentialsPath)
		return nil
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return err
	}
	body := fmt.Sprintf("email=%s\npassword=%s\norganization=%s\n", res.User.Email, password, res.Organization.Slug)
	if err := os.WriteFile(credentialsPath, []byte(body), 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", credentialsPath, err)
	}
	fmt.Fprintf(out, "==> created the local owner (shown once; also saved in %s)\n    email:        %s\n    password:     %s\n    organization: %s\n",
		credentialsPath, res.User.Email, password, res.Organization.Slug)
	logger.Info("local owner created", "organization_id", res.Organization.ID)
	return nil
}

// reportLaunch opens the public gate on a fresh installation (no control
// yet), recorded as its first control version, and says what the gate is.
// An installation that already has a control keeps it: bootstrap never
// reopens a gate an operator closed.
func reportLaunch(ctx context.Context, svc *launch.Service, out io.Writer) error {
	current, err := svc.Current(ctx)
	if err != nil {
		return err
	}
	if current == nil {
		c, _, err := openPublicGate(ctx, svc, "local bootstrap: a make run installation opens the public gate",
			"bootstrap-public-gate", "bootstrap")
		if err != nil {
			return fmt.Errorf("opening the launch gate: %w", err)
		}
		current = &c
	}
	if current.PublicGate {
		fmt.Fprintf(out, "==> launch gate: open for every organization (launch control version %d)\n", current.Version)
		return nil
	}
	fmt.Fprintf(out, "==> launch gate: closed; only its %d canary workspaces are admitted (launch control version %d); open it with: cairn-api launch open-gate -reason ... (see docs/operating/launch-control.md)\n",
		len(current.CanaryAllowlist), current.Version)
	return nil
}

// writeCLIConfig gives the local owner an API token for the OpenTofu CLI,
// once, in a CLI configuration file (mode 0600) ready for
// TF_CLI_CONFIG_FILE, and says how to use it.
func writeCLIConfig(ctx context.Context, cfg config.Config, conn *sqlx.DB, ident *identity.Service, res identity.BootstrapResult, out io.Writer) error {
	u, err := url.Parse(cfg.PublicURL)
	if err != nil {
		return err
	}
	path := filepath.Join(cfg.DataDir, "tofurc")
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		owner := access.Principal{Kind: access.KindUser, ID: res.User.ID, OrganizationID: res.Organization.ID,
			Role: access.RoleOwner, Permissions: access.PermissionsOf(access.RoleOwner)}
		var plaintext string
		if err := db.WithTx(ctx, conn, func(tx *sqlx.Tx) error {
			var err error
			_, plaintext, err = ident.CreateUserToken(ctx, tx, owner, "make run: local OpenTofu CLI", nil, false)
			return err
		}); err != nil {
			return fmt.Errorf("creating the CLI token: %w", err)
		}
		body := fmt.Sprintf("credentials %q {\n  token = %q\n}\n", u.Host, plaintext)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "==> OpenTofu CLI: export TF_CLI_CONFIG_FILE=%s", path)
	if bundle := os.Getenv("SSL_CERT_FILE"); bundle != "" && u.Scheme == "https" {
		fmt.Fprintf(out, " SSL_CERT_FILE=%s", bundle)
	}
	fmt.Fprintf(out, "\n    and use: cloud { hostname = %q  organization = %q  workspaces { name = \"...\" } }\n", u.Host, res.Organization.Slug)
	return nil
}
