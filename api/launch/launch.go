package launch

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/cairnhq/cairn/api/platform/id"
	"github.com/cairnhq/cairn/api/platform/jsondoc"
)

// Control is one version of the production launch-control document. It is
// read fail-closed: a missing or malformed control admits nothing.
type Control struct {
	Version int `json:"-"`
	// PublicGate opens the service to every organization when true.
	// While it is closed nothing wider than an exact canary pair passes:
	// there is no organization-wide launch (SPEC §1 rule 5).
	PublicGate bool `json:"public_gate"`
	// CanaryAllowlist admits exact organization-and-workspace pairs only.
	CanaryAllowlist []Pair `json:"canary_allowlist"`
	// NewRunsEnabled and AppliesEnabled are independent switches.
	NewRunsEnabled bool `json:"new_runs_enabled"`
	AppliesEnabled bool `json:"applies_enabled"`
	// FederationProviders and Regions switch providers and regions on.
	FederationProviders map[string]bool `json:"federation_providers"`
	Regions             map[string]bool `json:"regions"`
	Ceilings            Ceilings        `json:"ceilings"`
	// RunnerReleases and PolicyReleases are the logical releases allowed to
	// run; a run pinned to another release is refused.
	RunnerReleases []string `json:"runner_releases"`
	PolicyReleases []string `json:"policy_releases"`
	// WorkflowRouting maps each workflow kind to the queue its jobs are
	// inserted on; only queues every worker serves can be named.
	WorkflowRouting map[string]string `json:"workflow_routing"`
}

// Pair is an exact organization-and-workspace canary. A workspace ID alone
// never admits anything: workspace IDs are organization-local.
type Pair struct {
	OrganizationID string `json:"organization_id"`
	WorkspaceID    string `json:"workspace_id"`
}

// Ceilings bound the resources runs may take.
type Ceilings struct {
	// SandboxesPerRegion bounds concurrently active sandboxes per region.
	SandboxesPerRegion map[string]int `json:"sandboxes_per_region"`
	// PendingRunsPerWorkspace bounds queued, non-terminal runs of one
	// workspace.
	PendingRunsPerWorkspace int `json:"pending_runs_per_workspace"`
}

// Bounds of a control document.
const (
	MaxAllowlist  = 100
	MaxReleases   = 32
	maxDocBytes   = 64 << 10
	MaxCeiling    = 10000
	RunnerRelease = "cairn-runner-1"
	PolicyRelease = "opa-1.18.2"
)

// FederationProviderNames are the cloud federation providers a control can
// switch.
var FederationProviderNames = []string{"aws", "gcp", "azure"}

// RegionNames are the execution regions a control can switch.
var RegionNames = []string{"us", "eu"}

// Workflow kinds a control routes.
const (
	WorkflowRun    = "run"
	WorkflowPolicy = "policy"
)

// WorkflowKinds are the workflows a control must route, each exactly once.
var WorkflowKinds = []string{WorkflowRun, WorkflowPolicy}

// Queues are the River queues every cairn-worker listens on. Routing can
// name only these, so a routed job never waits on a queue nobody serves.
var Queues = []string{"default", "runs", "policy"}

var releasePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{0,63}$`)

// Default is the control document an operator starts from: gate closed, no
// canaries, runs and applies switched on, only the "us" region, the
// releases this build ships, modest ceilings, and each workflow on its own
// queue. (`make run` writes it with the public gate open.)
func Default() Control {
	return Control{
		CanaryAllowlist:     []Pair{},
		NewRunsEnabled:      true,
		AppliesEnabled:      true,
		FederationProviders: map[string]bool{"aws": false, "gcp": false, "azure": false},
		Regions:             map[string]bool{"us": true, "eu": false},
		Ceilings:            Ceilings{SandboxesPerRegion: map[string]int{"us": 4, "eu": 0}, PendingRunsPerWorkspace: 50},
		RunnerReleases:      []string{RunnerRelease},
		PolicyReleases:      []string{PolicyRelease},
		WorkflowRouting:     map[string]string{WorkflowRun: "runs", WorkflowPolicy: "policy"},
	}
}

// Parse decodes and validates a control document strictly: unknown fields,
// missing sections and out-of-bound values are errors. A document of an
// older format (one with launched_organizations) is therefore malformed
// and admits nothing; migration 00014 appended a converted version.
func Parse(doc []byte) (Control, error) {
	if len(doc) > maxDocBytes {
		return Control{}, fmt.Errorf("%w: document over %d bytes", ErrMalformed, maxDocBytes)
	}
	var c Control
	if err := jsondoc.DecodeStrict(doc, &c); err != nil {
		return Control{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return c, c.Validate()
}

// Validate checks every bound of a control.
func (c Control) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
	}
	if c.CanaryAllowlist == nil || c.FederationProviders == nil ||
		c.Regions == nil || c.Ceilings.SandboxesPerRegion == nil || c.RunnerReleases == nil ||
		c.PolicyReleases == nil || c.WorkflowRouting == nil {
		return bad("every section must be present")
	}
	if len(c.CanaryAllowlist) > MaxAllowlist {
		return bad("more than %d canary pairs", MaxAllowlist)
	}
	for _, p := range c.CanaryAllowlist {
		if !id.HasPrefix(p.OrganizationID, "org") || !id.HasPrefix(p.WorkspaceID, "ws") {
			return bad("canary pairs need an exact organization ID and workspace ID")
		}
	}
	if !sameKeys(c.FederationProviders, FederationProviderNames) {
		return bad("federation_providers must name exactly %v", FederationProviderNames)
	}
	if !sameKeys(c.Regions, RegionNames) {
		return bad("regions must name exactly %v", RegionNames)
	}
	if !sameKeys(c.Ceilings.SandboxesPerRegion, RegionNames) {
		return bad("ceilings.sandboxes_per_region must name exactly %v", RegionNames)
	}
	for region, n := range c.Ceilings.SandboxesPerRegion {
		if n < 0 || n > MaxCeiling {
			return bad("ceiling for %s out of range", region)
		}
	}
	if c.Ceilings.PendingRunsPerWorkspace < 1 || c.Ceilings.PendingRunsPerWorkspace > MaxCeiling {
		return bad("ceilings.pending_runs_per_workspace out of range")
	}
	for _, list := range [][]string{c.RunnerReleases, c.PolicyReleases} {
		if len(list) > MaxReleases {
			return bad("more than %d releases", MaxReleases)
		}
		for _, r := range list {
			if !releasePattern.MatchString(r) {
				return bad("release %q", r)
			}
		}
	}
	if !sameKeys(c.WorkflowRouting, WorkflowKinds) {
		return bad("workflow_routing must name exactly %v", WorkflowKinds)
	}
	for kind, queue := range c.WorkflowRouting {
		if !slices.Contains(Queues, queue) {
			return bad("workflow_routing sends %s to %q; workers serve only %v", kind, queue, Queues)
		}
	}
	return nil
}

func sameKeys[V any](m map[string]V, names []string) bool {
	if len(m) != len(names) {
		return false
	}
	for _, n := range names {
		if _, ok := m[n]; !ok {
			return false
		}
	}
	return true
}

// Canonical returns the control's JSON with sorted lists, for storage and
// for comparing two documents.
func (c Control) Canonical() []byte {
	c.RunnerReleases = sortedCopy(c.RunnerReleases)
	c.PolicyReleases = sortedCopy(c.PolicyReleases)
	pairs := slices.Clone(c.CanaryAllowlist)
	slices.SortFunc(pairs, func(a, b Pair) int {
		return strings.Compare(a.OrganizationID+"/"+a.WorkspaceID, b.OrganizationID+"/"+b.WorkspaceID)
	})
	c.CanaryAllowlist = pairs
	out, _ := json.Marshal(c)
	return out
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// Subject is what a request wants admission to: an organization, and for
// workspace-scoped requests the exact workspace. An empty WorkspaceID means
// an organization-wide request.
type Subject struct {
	OrganizationID string
	WorkspaceID    string
}

// Suspension flags for a subject.
type Suspension struct {
	Organization bool
	Workspace    bool
}

// Admission is how a request was admitted.
type Admission string

const (
	// AdmissionOpen means the public gate admits it.
	AdmissionOpen Admission = "open"
	// AdmissionCanary means only an exact allowlisted pair admits it; the
	// caller may see that exact workspace's surface and nothing wider.
	AdmissionCanary Admission = "canary"
)

// Decision is the outcome of an admission check. Reason is for logs only;
// clients never learn why they were refused.
type Decision struct {
	Admitted  bool
	Admission Admission
	Reason    string
}

// Rule decides admission from the control in force (nil when none).
type Rule func(c *Control, s Subject, susp Suspension) Decision

// AdmitAccess is the launch gate alone: no control refuses, an open public
// gate admits, and while it is closed only an exact allowlisted
// organization-and-workspace pair passes; organization-wide and unresolved
// subjects never do. It is the rule for remote-backend reads, cancellation
// and cleanup, which a suspension does not stop (SPEC §1 rules 5 and 7).
func AdmitAccess(c *Control, s Subject, _ Suspension) Decision {
	switch {
	case c == nil:
		return Decision{Reason: "control_missing"}
	case c.PublicGate:
		return Decision{Admitted: true, Admission: AdmissionOpen, Reason: "public_gate"}
	case s.OrganizationID == "":
		return Decision{Reason: "ownership_unresolved"}
	case s.WorkspaceID == "":
		return Decision{Reason: "gate_closed"}
	case slices.Contains(c.CanaryAllowlist, Pair(s)):
		return Decision{Admitted: true, Admission: AdmissionCanary, Reason: "canary"}
	default:
		return Decision{Reason: "not_allowlisted"}
	}
}

// Admit is the rule for every protected mutation and upload: the launch
// gate, and no suspension of the subject's organization or workspace. It
// is pure so every rule can be table-tested.
func Admit(c *Control, s Subject, susp Suspension) Decision {
	if c != nil && (susp.Organization || susp.Workspace) {
		return Decision{Reason: "suspended"}
	}
	return AdmitAccess(c, s, susp)
}

// NewRun is what a new managed run asks for.
type NewRun struct {
	Region        string
	RunnerRelease string
	// Unfinished counts the workspace's non-terminal runs before this one.
	Unfinished int
}

// AdmitNewRun returns the rule for creating a managed run (SPEC §1 rule 7):
// admission, then the new-run switch, the pinned region's switch (an eu
// workspace is refused, never moved), the workspace's run ceiling and the
// runner release allowlist.
func AdmitNewRun(n NewRun) Rule {
	return func(c *Control, s Subject, susp Suspension) Decision {
		d := Admit(c, s, susp)
		switch {
		case !d.Admitted:
			return d
		case !c.NewRunsEnabled:
			return Decision{Reason: "new_runs_disabled"}
		case !c.Regions[n.Region]:
			return Decision{Reason: "region_disabled"}
		case n.Unfinished >= c.Ceilings.PendingRunsPerWorkspace:
			return Decision{Reason: "pending_run_ceiling"}
		case !slices.Contains(c.RunnerReleases, n.RunnerRelease):
			return Decision{Reason: "runner_release_not_allowed"}
		}
		return d
	}
}

// AdmitApply is the rule for authorizing and starting an apply: admission
// and the apply switch, checked independently at approval and at runner
// start.
func AdmitApply(c *Control, s Subject, susp Suspension) Decision {
	d := Admit(c, s, susp)
	if d.Admitted && !c.AppliesEnabled {
		return Decision{Reason: "applies_disabled"}
	}
	return d
}

// AdmitSandbox returns the rule for creating a sandbox: the stored region
// must still be switched on.
func AdmitSandbox(region string) Rule {
	return func(c *Control, s Subject, susp Suspension) Decision {
		if c == nil || !c.Regions[region] {
			return Decision{Reason: "region_disabled"}
		}
		return Decision{Admitted: true, Admission: AdmissionOpen, Reason: "region_enabled"}
	}
}

// AdmitPolicyBuild returns the rule a policy build rechecks when its job
// starts, before it takes a capacity lease: admission of the build
// workspace, the build region's switch, and the policy release this build
// compiles with.
func AdmitPolicyBuild(region string) Rule {
	return func(c *Control, s Subject, susp Suspension) Decision {
		d := Admit(c, s, susp)
		switch {
		case !d.Admitted:
			return d
		case !c.Regions[region]:
			return Decision{Reason: "region_disabled"}
		case !slices.Contains(c.PolicyReleases, PolicyRelease):
			return Decision{Reason: "policy_release_not_allowed"}
		}
		return d
	}
}

// AdmitPolicyEvaluation is the rule of a run's policy stage: the release
// that evaluates must be allowed. The run itself was admitted when it was
// created, so the gate and suspensions are not asked again here.
func AdmitPolicyEvaluation(c *Control, _ Subject, _ Suspension) Decision {
	if c == nil || !slices.Contains(c.PolicyReleases, PolicyRelease) {
		return Decision{Reason: "policy_release_not_allowed"}
	}
	return Decision{Admitted: true, Admission: AdmissionOpen, Reason: "policy_release_allowed"}
}

// AdmitFederation returns the rule for handing a sandbox credentials of a
// cloud federation provider: admission and that provider's switch. No
// credential profile exists yet; this is the check the profile's
// redemption must make.
func AdmitFederation(provider string) Rule {
	return func(c *Control, s Subject, susp Suspension) Decision {
		d := Admit(c, s, susp)
		if d.Admitted && !c.FederationProviders[provider] {
			return Decision{Reason: "federation_provider_disabled"}
		}
		return d
	}
}

// Queue is the queue a control routes a workflow kind to ("" when none).
func (c *Control) Queue(kind string) string {
	if c == nil {
		return ""
	}
	return c.WorkflowRouting[kind]
}

// SandboxCeiling is the regional sandbox ceiling of a control (0, so
// nothing runs, when there is none).
func SandboxCeiling(c *Control, region string) int {
	if c == nil {
		return 0
	}
	return c.Ceilings.SandboxesPerRegion[region]
}
