package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// clientFrom is an HTTP client whose connections leave from a given
// loopback address (any of 127.0.0.0/8 works on Linux without setup), so
// the API sees requests from different client addresses.
func clientFrom(addr string) *http.Client {
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(addr)}, Timeout: 10 * time.Second}
	return &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext, DisableKeepAlives: true}, Timeout: 2 * time.Minute}
}

// authAnswer is one identity-server answer.
type authAnswer struct {
	status     int
	code       string
	retryAfter int
}

func postAuth(t *testing.T, client *http.Client, url string, body any, header ...string) authAnswer {
	t.Helper()
	raw, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(raw))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var env struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	answer, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(answer, &env)
	retry, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
	return authAnswer{status: resp.StatusCode, code: env.Error.Code, retryAfter: retry}
}

// pairThrottle models the API's throttle of one (e-mail, address) pair
// (api/identity/throttle.go): five free failures, then a wait of 1 s
// after the fifth, doubling with each further admitted failure. The test
// cannot know the server's clock, only when it sent a request and when
// the answer came; the model checks each answer against both, so a
// loaded machine that stretches the sequence past a wait is not mistaken
// for a broken throttle, and an admission inside a wait still fails.
type pairThrottle struct {
	t       *testing.T
	counted int
	// lastSent and lastAnswered bracket the last admitted attempt.
	lastSent, lastAnswered time.Time
}

// wait is the wait after the attempts counted so far.
func (p *pairThrottle) wait() time.Duration {
	if p.counted < 5 {
		return 0
	}
	return time.Second << (p.counted - 5)
}

// try sends one attempt and checks its answer: an attempt surely inside
// the wait is refused with RATE_LIMITED and a Retry-After, one surely
// after it is admitted (answered admitted), one in between may be either.
func (p *pairThrottle) try(what string, admitted int, send func() authAnswer) authAnswer {
	p.t.Helper()
	sent := time.Now()
	a := send()
	answered := time.Now()
	const slack = 100 * time.Millisecond
	wait := p.wait()
	surelyInside := p.counted >= 5 && answered.Sub(p.lastSent) < wait-slack
	surelyAfter := p.counted < 5 || sent.Sub(p.lastAnswered) > wait+slack
	switch {
	case a.status == http.StatusTooManyRequests && !surelyAfter:
		if a.code != "RATE_LIMITED" || a.retryAfter < 1 || time.Duration(a.retryAfter-1)*time.Second > wait {
			p.t.Fatalf("%s: %+v inside a wait of %v", what, a, wait)
		}
	case a.status == admitted && !surelyInside:
		p.counted++
		p.lastSent, p.lastAnswered = sent, answered
	default:
		p.t.Fatalf("%s: %+v after %d counted failures (wait %v, %v since the last counted one)", what, a, p.counted, wait, sent.Sub(p.lastAnswered))
	}
	return a
}

// waitOut sleeps until the current wait has surely passed.
func (p *pairThrottle) waitOut() {
	time.Sleep(time.Until(p.lastAnswered.Add(p.wait() + 200*time.Millisecond)))
}

// TestGuessingFromOneAddressDoesNotLockTheOwnerOut is the lockout issue 13
// names, against the real cairn-api: twenty wrong passwords for an account
// from 127.0.0.1 are answered 401 and then 429 with a Retry-After, exactly
// as for an e-mail without an account; the wait grows; a forged
// X-Forwarded-For changes nothing without trusted proxies; and the owner
// signs in from 127.0.0.2 at once.
func TestGuessingFromOneAddressDoesNotLockTheOwnerOut(t *testing.T) {
	t.Parallel()
	s := StartStack(t)
	attacker, owner := clientFrom("127.0.0.1"), clientFrom("127.0.0.2")
	signIn := s.APIURL + "/api/auth/sign-in/email"
	if a := postAuth(t, owner, s.APIURL+"/api/auth/sign-up/email",
		map[string]string{"email": "owner@example.com", "password": "correct horse battery staple", "name": "Owner"}); a.status != http.StatusOK {
		t.Fatalf("sign-up: %+v", a)
	}
	guess := func(email string) func() authAnswer {
		return func() authAnswer {
			return postAuth(t, attacker, signIn, map[string]string{"email": email, "password": "wrong password guess"})
		}
	}
	throttles := map[string]*pairThrottle{}
	for _, email := range []string{"owner@example.com", "nobody@example.com"} {
		p := &pairThrottle{t: t}
		throttles[email] = p
		refused := 0
		for i := range 20 {
			if a := p.try(fmt.Sprintf("%s attempt %d", email, i+1), http.StatusUnauthorized, guess(email)); a.status == http.StatusTooManyRequests {
				refused++
			}
		}
		// An e-mail without an account is slowed exactly as one with.
		if p.counted < 5 || refused == 0 {
			t.Fatalf("%s: %d counted failures, %d refused", email, p.counted, refused)
		}
	}
	// The wait grows: after waiting it out, one more failure doubles it,
	// and inside that wait even the right password, behind a forged
	// X-Forwarded-For or not, is refused.
	p := throttles["owner@example.com"]
	p.waitOut()
	before := p.wait()
	p.try("a failure after waiting", http.StatusUnauthorized, guess("owner@example.com"))
	if p.wait() != 2*before {
		t.Fatalf("the wait went from %v to %v", before, p.wait())
	}
	right := map[string]string{"email": "owner@example.com", "password": "correct horse battery staple"}
	for _, forged := range []string{"127.0.0.9", ""} {
		a := p.try("the right password from the slowed address (X-Forwarded-For "+forged+")", http.StatusOK, func() authAnswer {
			if forged == "" {
				return postAuth(t, attacker, signIn, right)
			}
			return postAuth(t, attacker, signIn, right, "X-Forwarded-For", forged)
		})
		if a.status != http.StatusTooManyRequests {
			t.Fatalf("the right password inside a wait of %v was admitted: %+v", p.wait(), a)
		}
	}
	if a := postAuth(t, owner, signIn, right); a.status != http.StatusOK {
		t.Fatalf("right password from another address: %+v", a)
	}
}

// TestBurstOfSignUpsStaysWithinTheHashingBudget sends 50 sign-ups at once,
// from 50 addresses (so the per-address sign-up limit stays out of the
// way), to the real cairn-api with production argon2id parameters (64 MiB,
// t=3, p=2) and the default hashing budget (128 MiB: two hashes at once).
// Each answer is a session or a retryable 503; retrying the refused ones
// creates every account; and the API's peak resident memory stays under
// 512 MiB where 50 unbounded hashes would hold 3.2 GiB.
func TestBurstOfSignUpsStaysWithinTheHashingBudget(t *testing.T) {
	t.Parallel()
	s := StartStack(t, WithEnv("CAIRN_ARGON2_MEMORY_KIB=65536", "CAIRN_ARGON2_ITERATIONS=3", "CAIRN_ARGON2_PARALLELISM=2"))
	pid := s.PID("api")
	before := peakRSSKiB(t, pid)
	const n = 50
	answers := make([]authAnswer, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	signUp := func(i int) authAnswer {
		return postAuth(t, clientFrom(fmt.Sprintf("127.0.1.%d", i+1)), s.APIURL+"/api/auth/sign-up/email", map[string]string{
			"email": fmt.Sprintf("burst-%d@example.com", i), "password": "correct horse battery staple", "name": "Burst"})
	}
	for i := range n {
		wg.Go(func() {
			<-start
			answers[i] = signUp(i)
		})
	}
	started := time.Now()
	close(start)
	wg.Wait()
	burst := time.Since(started)
	created, busy := 0, 0
	for i, a := range answers {
		switch {
		case a.status == http.StatusOK:
			created++
		case a.status == http.StatusServiceUnavailable && a.code == "SIGN_IN_BUSY" && a.retryAfter > 0:
			busy++
		default:
			t.Fatalf("sign-up %d: %+v", i, a)
		}
	}
	if created == 0 {
		t.Fatalf("no sign-up got through the burst (%d busy)", busy)
	}
	// The refused ones were never created: retrying them one at a time
	// (waiting as told only when refused again) creates them all.
	for i, a := range answers {
		for tries := 0; a.status != http.StatusOK; tries++ {
			if tries == 10 {
				t.Fatalf("sign-up %d still refused after retries: %+v", i, a)
			}
			if tries > 0 {
				time.Sleep(time.Duration(a.retryAfter) * time.Second)
			}
			a = signUp(i)
			if a.status != http.StatusOK && a.status != http.StatusServiceUnavailable {
				t.Fatalf("retried sign-up %d: %+v", i, a)
			}
		}
	}
	peak := peakRSSKiB(t, pid)
	t.Logf("50 concurrent sign-ups (argon2id 64 MiB, t=3, p=2, budget 128 MiB): %d created and %d refused busy in %s; "+
		"API peak RSS (VmHWM) %d MiB before, %d MiB after (bound 512 MiB)", created, busy, burst.Round(time.Millisecond), before>>10, peak>>10)
	if peak > 512<<10 {
		t.Fatalf("API peak RSS %d MiB is over 512 MiB", peak>>10)
	}
}

// peakRSSKiB reads a process's peak resident set size (VmHWM).
func peakRSSKiB(t *testing.T, pid int) int {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kib, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
			if err != nil {
				t.Fatalf("VmHWM %q: %v", rest, err)
			}
			return kib
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

// dashboardSignIn submits the dashboard's sign-in form from client and
// says how it went: "signed in" (redirected on), "slowed" (told to wait)
// or "refused" (wrong password).
func dashboardSignIn(t *testing.T, s *Stack, client *http.Client, email, password string) string {
	t.Helper()
	resp, err := client.Get(s.DashboardURL + "/sign-in")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	csrf := regexp.MustCompile(`name="csrf_token" value="([0-9a-f]+)"`).FindSubmatch(page)
	if csrf == nil {
		t.Fatalf("no CSRF token on the sign-in page: %d %s", resp.StatusCode, page)
	}
	form := url.Values{"csrf_token": {string(csrf[1])}, "email": {email}, "password": {password}}
	req, _ := http.NewRequest(http.MethodPost, s.DashboardURL+"/sign-in", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", s.DashboardURL)
	// A browser may say anything here; the dashboard must not believe it.
	req.Header.Set("X-Forwarded-For", fmt.Sprintf("198.51.100.%d", time.Now().UnixNano()%250+1))
	resp, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusSeeOther:
		return "signed in"
	case bytes.Contains(answer, []byte("Too many attempts")):
		return "slowed"
	case bytes.Contains(answer, []byte("do not match an account")):
		return "refused"
	}
	t.Fatalf("dashboard sign-in answered %d: %s", resp.StatusCode, answer)
	return ""
}

// browserFrom is a browser-like client at a loopback address: it keeps
// the dashboard's cookie and does not follow redirects.
func browserFrom(addr string) *http.Client {
	c := clientFrom(addr)
	c.Jar, _ = cookiejar.New(nil)
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return c
}

// TestDashboardSignInsAreThrottledPerBrowser: with the stack's default
// configuration (no trusted proxies), a stranger's browser guessing
// through the dashboard is slowed as its own address, not as the
// dashboard's: its failures, over many accounts and behind a forged
// X-Forwarded-For, must not make everyone else who signs in through the
// same dashboard wait.
func TestDashboardSignInsAreThrottledPerBrowser(t *testing.T) {
	t.Parallel()
	s := StartStack(t)
	owner := s.newMember(t, "dashowner")
	stranger, colleague := browserFrom("127.0.0.3"), browserFrom("127.0.0.4")
	slowed := 0
	for i := range 40 {
		if dashboardSignIn(t, s, stranger, fmt.Sprintf("guess-%d@example.com", i), "wrong password guess") == "slowed" {
			slowed++
		}
	}
	if slowed == 0 {
		t.Fatal("forty failed sign-ins from one browser were never slowed")
	}
	if got := dashboardSignIn(t, s, colleague, owner.email, "correct horse battery staple"); got != "signed in" {
		t.Fatalf("another browser signing in with the right password: %s", got)
	}
}
