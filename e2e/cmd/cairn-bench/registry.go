package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/cairnhq/cairn/e2e/devstack"
)

// registryBenchVersions (scaled by -size) is how many versions the version-list module has.
const registryBenchVersions = 1000

// benchModuleFiles is a small module of the kind a platform team shares:
// a few inputs, outputs and a nested module.
func benchModuleFiles(name string) map[string]string {
	var main strings.Builder
	for i := range 10 {
		fmt.Fprintf(&main, "variable \"v%d\" {\n  type    = string\n  default = \"%s-%d\"\n}\n\noutput \"o%d\" {\n  value = var.v%d\n}\n\n", i, name, i, i, i)
	}
	return map[string]string{
		"README.md":           "# " + name + "\n",
		"main.tf":             main.String(),
		"modules/inner/in.tf": "output \"inner\" {\n  value = \"" + name + "\"\n}\n",
	}
}

// benchRegistry measures the module registry through the real CLI: `tofu
// init` of a configuration calling three registry modules against the same
// three modules from a local directory (the floor: no lookup, no download),
// and the modules.v1 version list of a module with 1,000 versions under
// concurrent load.
func benchRegistry(ctx context.Context, api *apiProcess, tlsFiles devstack.TLSFiles, session, userToken, org string, rounds int) error {
	tofu, err := filepath.Abs(filepath.Join(devstack.ToolchainDir(".", "tofu", "1.10.6"), "tofu"))
	if err != nil {
		return err
	}
	c := api.Client
	publish := func(name string, versions []string, parallel int) error {
		var mod struct{ ID string }
		if _, err := v1(c, http.MethodPost, api.URL+"/v1/registry/modules", session,
			jsonBody(map[string]string{"name": name, "provider": "aws"}), "application/json", &mod); err != nil {
			return err
		}
		archive := devstack.TarGz(benchModuleFiles(name))
		work := make(chan string)
		errs := make(chan error, parallel)
		var wg sync.WaitGroup
		for range parallel {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for v := range work {
					if _, err := v1(c, http.MethodPost, api.URL+"/v1/registry/modules/"+mod.ID+"/versions?version="+v, session,
						archive, "application/gzip", nil); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		for _, v := range versions {
			work <- v
		}
		close(work)
		wg.Wait()
		close(errs)
		return <-errs
	}
	names := []string{"bench-network", "bench-storage", "bench-compute"}
	for _, name := range names {
		if err := publish(name, []string{"1.0.0"}, 1); err != nil {
			return err
		}
	}

	home, err := os.MkdirTemp("", "cairn-bench-registry-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(home)
	// A registry source address needs a host name with a dot: the API's
	// certificate also names 127.0.0.1.
	host := strings.Replace(api.Host, "localhost", "127.0.0.1", 1)
	rc := filepath.Join(home, "tofurc")
	if err := os.WriteFile(rc, []byte(fmt.Sprintf("credentials %q {\n  token = %q\n}\n", host, userToken)), 0o600); err != nil {
		return err
	}
	env := append(os.Environ(), "HOME="+home, "TF_CLI_CONFIG_FILE="+rc, "SSL_CERT_FILE="+tlsFiles.Bundle,
		"TF_IN_AUTOMATION=1", "TF_INPUT=0", "CHECKPOINT_DISABLE=1")
	local := filepath.Join(home, "local-modules")
	for _, name := range names {
		for path, body := range benchModuleFiles(name) {
			p := filepath.Join(local, name, path)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
				return err
			}
		}
	}
	config := func(source func(name string) string) string {
		var b strings.Builder
		for _, name := range names {
			fmt.Fprintf(&b, "module %q {\n  %s\n}\n\n", name, source(name))
		}
		return b.String()
	}
	configs := map[string]string{
		"registry": config(func(name string) string {
			return fmt.Sprintf("source  = %q\n  version = \"~> 1.0\"", host+"/"+org+"/"+name+"/aws")
		}),
		"local": config(func(name string) string { return fmt.Sprintf("source = %q", filepath.Join(local, name)) }),
	}
	timings := map[string][]float64{}
	for round := 0; round <= rounds; round++ {
		for _, kind := range []string{"local", "registry"} {
			dir, err := os.MkdirTemp(home, "init-")
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(configs[kind]), 0o644); err != nil {
				return err
			}
			cmd := tool(ctx, tofu, "init", "-no-color")
			cmd.Dir, cmd.Env = dir, env
			start := time.Now()
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("tofu init (%s modules): %v\n%s", kind, err, out)
			}
			if round > 0 { // the first round warms the CLI and the API
				timings[kind] = append(timings[kind], ms64(time.Since(start)))
			}
			_ = os.RemoveAll(dir)
		}
	}
	reg, loc := median(timings["registry"]), median(timings["local"])
	fmt.Printf("tofu init, 3 modules, median of %d: local directory %7.1f ms, registry %7.1f ms, added %+7.1f ms (x%.2f)\n",
		rounds, loc, reg, reg-loc, reg/loc)

	versions := make([]string, sized(registryBenchVersions))
	for i := range versions {
		versions[i] = fmt.Sprintf("%d.%d.%d", 1+i/100, (i/10)%10, i%10)
	}
	start := time.Now()
	if err := publish("bench-many", versions, 4); err != nil {
		return err
	}
	seeded := time.Since(start)
	fmt.Printf("publishing %d versions through /v1 (4 clients): %.1f s, %.1f ms each\n", sized(registryBenchVersions),
		seeded.Seconds(), ms64(seeded)/float64(sized(registryBenchVersions)))
	transport := c.Transport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost, transport.MaxIdleConns = *concurrency*2, *concurrency*2
	client := &http.Client{Transport: transport, Timeout: 30 * time.Second}
	list := api.URL + "/api/registry/v1/modules/" + org + "/bench-many/aws/versions"
	listed := load(fmt.Sprintf("GET modules.v1 versions (%d versions)", sized(registryBenchVersions)), *concurrency, *duration, func(int, int) bool {
		req, _ := http.NewRequest(http.MethodGet, list, nil)
		req.Header.Set("Authorization", "Bearer "+userToken)
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var doc struct {
			Modules []struct{ Versions []struct{ Version string } }
		}
		return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&doc) == nil && len(doc.Modules) == 1 &&
			len(doc.Modules[0].Versions) == sized(registryBenchVersions)
	})
	report(listed, result{}, "")
	return nil
}
