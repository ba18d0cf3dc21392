package devstack

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
)

// chromiumNames are the names Chromium's binary goes by on PATH: Debian's
// package, other distributions' package, and Google's build.
var chromiumNames = []string{"chromium", "chromium-browser", "google-chrome"}

// ChromiumPath returns the browser the dashboard tests drive: $CAIRN_CHROMIUM
// when set, else the first Chromium found on PATH. The error says how to
// install one, since a missing browser is a machine problem, not a test failure.
func ChromiumPath() (string, error) {
	if p := os.Getenv("CAIRN_CHROMIUM"); p != "" {
		path, err := exec.LookPath(p)
		if err != nil {
			return "", fmt.Errorf("CAIRN_CHROMIUM=%s is not an executable: %w", p, err)
		}
		return path, nil
	}
	for _, name := range chromiumNames {
		if path, err := exec.LookPath(name); err == nil {
			return path, nil
		}
	}
	return "", errors.New("no Chromium found (looked for $CAIRN_CHROMIUM, chromium, chromium-browser, google-chrome on PATH): run `make deps-test` to install Debian's chromium package")
}
