package config_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/api/platform/config"
)

func TestTrustedProxiesAreCIDRsAndNoneByDefault(t *testing.T) {
	t.Parallel()
	cfg, err := config.LoadFrom(map[string]string{})
	if err != nil || len(cfg.TrustedProxies) != 0 {
		t.Fatalf("default = %v, %v", cfg.TrustedProxies, err)
	}
	cfg, err = config.LoadFrom(map[string]string{"CAIRN_TRUSTED_PROXIES": "10.0.0.0/8, 2001:db8::/32"})
	if err != nil || len(cfg.TrustedProxyPrefixes()) != 2 || !cfg.TrustedProxyPrefixes()[1].Contains(netip.MustParseAddr("2001:db8::1")) {
		t.Fatalf("parsed = %v, %v", cfg.TrustedProxies, err)
	}
	for _, bad := range []string{"10.0.0.1", "10.0.0.0/33", "proxy.example"} {
		if _, err := config.LoadFrom(map[string]string{"CAIRN_TRUSTED_PROXIES": bad}); err == nil || !strings.Contains(err.Error(), "CAIRN_TRUSTED_PROXIES") {
			t.Errorf("%q accepted or not named: %v", bad, err)
		}
	}
}

func TestPasswordHashBudgetMustHoldOneHash(t *testing.T) {
	t.Parallel()
	if _, err := config.LoadFrom(map[string]string{"CAIRN_ARGON2_BUDGET_MIB": "32"}); err == nil {
		t.Fatal("a budget smaller than one 64 MiB hash was accepted")
	}
	cfg, err := config.LoadFrom(map[string]string{})
	if err != nil || cfg.Argon2BudgetMiB != 128 || cfg.Argon2Wait.Seconds() != 2 {
		t.Fatalf("defaults = %d MiB, %v, %v", cfg.Argon2BudgetMiB, cfg.Argon2Wait, err)
	}
}
