package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/cairnhq/cairn/api/identity"
	"github.com/cairnhq/cairn/api/platform/config"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/server"
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
	if cfg.DatabaseURL == "" || !cfg.AuthReady() {
		return errors.New("bootstrap needs DATABASE_URL and AUTH_SECRET")
	}
	conn, err := db.Open(ctx, cfg.DatabaseURL.Reveal(), 4)
	if err != nil {
		return err
	}
	defer conn.Close()
	ident, err := identity.NewService(conn, server.IdentityOptions(cfg))
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
