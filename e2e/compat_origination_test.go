package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kproxy/kproxy/e2e/harness"
	"github.com/kproxy/kproxy/e2e/kclients"
)

// The sasl-origination column: the client-pod shape, where the
// application holds no credentials and kproxy authenticates every broker
// connection itself (sasl.upstream) and re-authenticates it before the
// broker's session ends (KIP-368). The broker's origination listeners
// (harness.KafkaOrigination) end sessions after harness.ReauthLifetime.
//
// Each cell runs the client library, configured without any credentials,
// through three kproxies of its own, at once, for originationRun:
//
//   - a producer through a kproxy authenticating with SCRAM-SHA-512 to a
//     SASL_PLAINTEXT listener, sending one record every
//     originationRun/originationRecords;
//   - a consumer (a group of one) through a kproxy authenticating with
//     SCRAM-SHA-512 over TLS (tls.upstream) to a SASL_SSL listener;
//   - a second consumer, in a group of its own, through a kproxy
//     authenticating with OAUTHBEARER (an unsecured JWT) to the broker's
//     default validator.
//
// Both consumers must receive every record exactly once, and at each
// kproxy: no authentication failed; every connection was closed by its
// client, never by kproxy or the broker; no connection took over the
// client's traffic after one was lost (a reconnect, see checkOrigination);
// and each connection in use for harness.ReauthLifetime ×
// originationMinReauths (at least one per client: each runs for
// originationRun) made kproxy re-authenticate at least
// originationMinReauths times. kproxy's counters and log are the cell's
// alone: kproxy re-authenticates each connection, so its counter of
// re-authentications is read against the connections its log lists.
//
// The cells run at once, one per broker slot: one at a time would add
// minutes per library to the suite. There is no direct control: a client
// without credentials cannot use the broker's SASL listeners (the
// sasl-plain and sasl-scram512 columns run the clients' own SASL).

const (
	// originationRun is how long each client of a cell keeps producing
	// or consuming: six sessions of harness.ReauthLifetime.
	originationRun     = 60 * time.Second
	originationRecords = 300
	// originationMinReauths is how many re-authentications a connection
	// that lived for that many session lifetimes must have had (kproxy
	// re-authenticates before 95% of each lifetime).
	originationMinReauths = 5
	// originationBusyRequests is how many requests a connection carries
	// over its life for it to count as in use throughout: only those are
	// held to originationMinReauths. kproxy re-authenticates idle
	// connections too, on the session's timer, but a client's bootstrap
	// connection (2 to 4 requests here) may be closed by the client
	// before its first session ends; the connections that produce, fetch
	// or heartbeat carry dozens to hundreds.
	originationBusyRequests = 10
)

// originationPath is one of a cell's kproxies and the client behind it.
type originationPath struct {
	name      string // in kproxy's and the test's names
	mechanism string
	tls       bool // tls.upstream to a SASL_SSL listener
	consumer  bool // a consumer; the producer otherwise
	// idp makes kproxy fetch its OAUTHBEARER tokens from the broker's
	// OAuth issuer (sasl.upstream.oauth) instead of a token file.
	idp    bool
	listen func(harness.OriginationSlot) (proxy, broker string)
}

var originationPaths = []originationPath{
	{name: "produce-scram", mechanism: "SCRAM-SHA-512", listen: func(s harness.OriginationSlot) (string, string) { return s.ProxySCRAM, s.SCRAM }},
	{name: "consume-scram-tls", mechanism: "SCRAM-SHA-512", tls: true, consumer: true, listen: func(s harness.OriginationSlot) (string, string) { return s.ProxySCRAMTLS, s.SCRAMTLS }},
	{name: "consume-oauthbearer", mechanism: "OAUTHBEARER", consumer: true, listen: func(s harness.OriginationSlot) (string, string) { return s.ProxyOAuth, s.OAuth }},
}

// oauthPaths are the oauth column's: kproxy holds only an OAuth client
// secret, fetches tokens from Hydra and refreshes them, and Kafka
// validates each against Hydra's keys and ends the session at its expiry.
var oauthPaths = []originationPath{
	{name: "produce-oauth", mechanism: "OAUTHBEARER", idp: true, listen: func(s harness.OriginationSlot) (string, string) { return s.ProxyJWT, s.JWT }},
	{name: "consume-oauth", mechanism: "OAUTHBEARER", idp: true, consumer: true, listen: func(s harness.OriginationSlot) (string, string) { return s.ProxyJWT2, s.JWT2 }},
}

// originationColumn is a column whose cells run all at once, each client
// without credentials through kproxies that authenticate themselves.
type originationColumn struct {
	scenario string // its compatScenarios name
	paths    []originationPath
	run      time.Duration // how long each client produces or consumes
	records  int
	// lifetime bounds a session at the broker; a connection in use for
	// minReauths of them must have been re-authenticated that often.
	lifetime   time.Duration
	minReauths int
	// sessions checks the listeners grant the sessions the cells rely on.
	sessions func(t *testing.T, k *harness.Kafka)
}

// originationColumns run at once, on the newest broker.
var originationColumns = []originationColumn{
	{scenario: "sasl-origination", paths: originationPaths, run: originationRun, records: originationRecords,
		lifetime: harness.ReauthLifetime, minReauths: originationMinReauths, sessions: requireSessionLifetimes},
	{scenario: "oauth", paths: oauthPaths, run: oauthRun, records: oauthRecords,
		lifetime: harness.HydraTokenLifetime, minReauths: oauthMinReauths, sessions: requireTokenSessions},
}

// The oauth column's clients run for three token lifetimes.
const (
	oauthRun        = 3 * harness.HydraTokenLifetime
	oauthRecords    = 360
	oauthMinReauths = 2
)

// authSeries is kproxy's counter of its SASL authentications of kind
// (initial, reauth) with result (ok, error).
func authSeries(kind, result string) string {
	return `kproxy_sasl_authentications_total{kind="` + kind + `",result="` + result + `"}`
}

// runOriginations runs the origination columns at once (each waits on
// clocks far more than it computes).
func (e *compatEnv) runOriginations(t *testing.T, m *matrix, version string) {
	var wg sync.WaitGroup
	for _, col := range originationColumns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.Run(col.scenario, func(t *testing.T) { e.runOrigination(t, m, version, col) })
		}()
	}
	wg.Wait()
}

// runOrigination runs col's cells, all at once, and records them in m.
// The broker was started WithOrigination(len(driverEntries)).
func (e *compatEnv) runOrigination(t *testing.T, m *matrix, version string, col originationColumn) {
	fixture := t.Run("fixture", func(t *testing.T) { col.sessions(t, e.kafka) })
	// Each cell's t.Run in a goroutine of its own rather than t.Parallel:
	// -parallel defaults to GOMAXPROCS, two cells at a time on a small
	// machine, and these cells wait far more than they compute.
	var wg sync.WaitGroup
	for slot, entry := range driverEntries {
		wg.Add(1)
		go func() {
			defer wg.Done() // here: a cell that -run leaves out runs no function
			t.Run(entry.id, func(t *testing.T) { runOriginationEntry(t, m, version, col, entry, slot, e.kafka, fixture) })
		}()
	}
	wg.Wait()
}

// runOriginationEntry runs entry's cell in slot and records it in m.
func runOriginationEntry(t *testing.T, m *matrix, version string, col originationColumn, entry *driverEntry, slot int, k *harness.Kafka, fixture bool) {
	s := scenarioNamed(col.scenario)
	d := entry.driver(t)
	m.named(entry, d.Name())
	if why := s.unsupported(d); why != "" {
		m.set(version, entry, s.name, cellUnsupported, why)
		return
	}
	if !fixture {
		m.set(version, entry, s.name, cellFail, "the broker's listeners did not grant the sessions the cells rely on; see the fixture test")
		t.Fatal("the fixture check failed")
	}
	m.set(version, entry, s.name, cellFail, "failed before it finished; see the test log")
	if err := runOriginationCell(t, k, col, k.Origination.Slots[slot], d); err != nil {
		m.set(version, entry, s.name, cellFail, err.Error())
		t.Fatal(err)
	}
	m.set(version, entry, s.name, cellPass, "")
}

func scenarioNamed(name string) scenario {
	for _, s := range compatScenarios {
		if s.name == name {
			return s
		}
	}
	panic("no scenario " + name + " in compatScenarios")
}

// requireSessionLifetimes checks, direct to each origination listener,
// that the broker accepts the credentials kproxy is given and grants
// sessions of harness.ReauthLifetime: otherwise no cell would see a
// re-authentication and each would pass for nothing.
func requireSessionLifetimes(t *testing.T, k *harness.Kafka) {
	tc, err := kclients.TLS{CAFile: k.TLS.Certs.CA}.Config()
	if err != nil {
		t.Fatal(err)
	}
	scramMech := scram.Auth{User: harness.ScramUser, Pass: harness.ScramPassword}.AsSha512Mechanism()
	oauthMech := oauth.Auth{Token: harness.OAuthToken(time.Hour)}.AsMechanism()
	for i, s := range k.Origination.Slots {
		for _, l := range []struct {
			addr string
			tls  bool
			mech sasl.Mechanism
		}{{s.SCRAM, false, scramMech}, {s.SCRAMTLS, true, scramMech}, {s.OAuth, false, oauthMech}} {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			cfg := tc.Clone()
			if !l.tls {
				cfg = nil
			} else {
				cfg.ServerName = "127.0.0.1"
			}
			life, err := harness.SessionLifetime(ctx, l.addr, cfg, l.mech)
			cancel()
			switch {
			case err != nil:
				t.Errorf("slot %d: %s at %s (tls %v): %v", i, l.mech.Name(), l.addr, l.tls, err)
			case life != harness.ReauthLifetime:
				t.Errorf("slot %d: %s at %s (tls %v): the broker granted a session lifetime of %v, want %v (connections.max.reauth.ms)",
					i, l.mech.Name(), l.addr, l.tls, life, harness.ReauthLifetime)
			}
		}
	}
	t.Logf("%d slots: every origination listener grants %v sessions", len(k.Origination.Slots), harness.ReauthLifetime)
}

// startOriginationKproxy starts path's kproxy for slot with its sasl:
// (and tls:) sections and the credentials in files of dir, as a mounted
// Secret holds them.
func startOriginationKproxy(t *testing.T, k *harness.Kafka, slot harness.OriginationSlot, p originationPath, lib, dir string) *harness.Kproxy {
	write := func(name, text string) string {
		path := filepath.Join(dir, p.name+"-"+name)
		if err := os.WriteFile(path, []byte(text+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	conf := "sasl:\n  upstream:\n    mechanism: " + p.mechanism + "\n"
	switch h := k.Origination.Issuer; {
	case p.idp:
		conf += fmt.Sprintf("    oauth:\n      token_endpoint: %s\n      client_id: %s\n      client_secret_file: %q\n      audience: %s\n",
			h.TokenURL, h.ClientID, write("client-secret", h.Secret), harness.HydraAudience)
	case p.mechanism == "OAUTHBEARER":
		conf += fmt.Sprintf("    token_file: %q\n", write("token", harness.OAuthToken(time.Hour)))
	default:
		conf += fmt.Sprintf("    username_file: %q\n    password_file: %q\n",
			write("username", harness.ScramUser), write("password", harness.ScramPassword))
	}
	if p.tls {
		conf += fmt.Sprintf("tls:\n  upstream:\n    ca_file: %q\n", k.TLS.Certs.CA)
	}
	path := write("kproxy.yaml", conf)
	proxy, broker := p.listen(slot)
	return harness.StartKproxy(t, "kproxy-"+lib+"-"+p.name, proxy, broker, "--config", path)
}

// runOriginationCell runs one library's cell in slot.
func runOriginationCell(t *testing.T, k *harness.Kafka, col originationColumn, slot harness.OriginationSlot, d kclients.Driver) error {
	lib := slug(d.Name())
	dir := t.TempDir()
	kps := make([]*harness.Kproxy, len(col.paths))
	for i, p := range col.paths {
		kps[i] = startOriginationKproxy(t, k, slot, p, lib, dir)
	}
	topic := slug(d.Name() + "-" + col.scenario)
	k.CreateTopic(t, topic, compatParts)
	want := records(topic, col.records)

	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), col.run+3*compatTimeout)
	defer cancel()
	errs := make([]error, len(col.paths))
	got := make([][]kclients.Delivered, len(col.paths))
	var wg sync.WaitGroup
	for i, p := range col.paths {
		conn := kclients.Conn{Bootstrap: kps[i].Addr} // no SASL, no TLS: kproxy holds both
		wg.Add(1)
		go func() {
			defer wg.Done()
			if p.consumer {
				got[i], errs[i] = d.Consume(ctx, kclients.ConsumeOpts{Conn: conn, Topic: topic, Group: topic + "-" + p.name,
					Count: len(want), Timeout: col.run + compatTimeout, Protocol: "classic", Members: 1})
			} else {
				errs[i] = d.Produce(ctx, kclients.ProduceOpts{Conn: conn, Topic: topic, Acks: "all", Compression: "none",
					Pace: col.run / time.Duration(col.records)}, want)
			}
			if errs[i] != nil {
				errs[i] = fmt.Errorf("%s: %w", p.name, errs[i])
			}
		}()
	}
	wg.Wait()
	t.Logf("clients done in %v", time.Since(start).Round(time.Millisecond))
	var problems []error
	for i, p := range col.paths {
		if errs[i] != nil {
			problems = append(problems, errs[i])
			continue
		}
		if p.consumer {
			sum, err := check(want, got[i], true, nil)
			if err != nil {
				problems = append(problems, fmt.Errorf("%s: %w", p.name, err))
				continue
			}
			t.Logf("%s: %d records, digest %s", p.name, len(want), sum)
		}
	}
	// The kproxies' own findings count even when a client failed: they
	// say why, often.
	for i, p := range col.paths {
		if err := checkOrigination(t, kps[i], col, p); err != nil {
			problems = append(problems, fmt.Errorf("%s: %w", p.name, err))
		}
	}
	return errors.Join(problems...)
}

// connLine is one of kproxy's "connection opened" and "connection
// closed" log lines, in part.
type connLine struct {
	Message    string  `json:"message"`
	Client     string  `json:"client"`
	Reason     string  `json:"reason"`
	Error      string  `json:"error"`
	DurationMS float64 `json:"duration_ms"`
	Requests   int64   `json:"requests"`
	Failed     int     `json:"failed_in_flight"`
}

// conn is one client connection as kproxy's log tells it: the place of
// its opening among the others, and its closing line.
type conn struct {
	order       int // openings before this one
	closedAfter int // openings before its closing line
	closed      *connLine
}

func (c *conn) life() time.Duration {
	return time.Duration(c.closed.DurationMS * float64(time.Millisecond))
}

// checkOrigination reads kp's counters and log once its client is gone
// (see the column's comment for what each check stands for). A reconnect
// is a connection that carried the client's traffic (more than
// originationBusyRequests requests) opened after one was lost: closed by
// kproxy or the broker, or given up by the client with requests
// unanswered once it had been in use for a session lifetime. Clients give
// up connections in other ways that are no reconnect: librdkafka drops
// its bootstrap connection, a request in flight, milliseconds after
// learning the brokers; clients close with a fetch in flight, and may
// open a connection to leave their group, as they finish.
func checkOrigination(t *testing.T, kp *harness.Kproxy, col originationColumn, p originationPath) error {
	deadline := time.Now().Add(15 * time.Second)
	for kp.Metric(t, "kproxy_connections_open") > 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("%v connections still open through kproxy 15s after the client finished", kp.Metric(t, "kproxy_connections_open"))
		}
		time.Sleep(250 * time.Millisecond)
	}
	var problems []string
	note := func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) }
	initialOK, reauthOK := kp.Metric(t, authSeries("initial", "ok")), kp.Metric(t, authSeries("reauth", "ok"))
	if n := kp.Metric(t, authSeries("initial", "error")) + kp.Metric(t, authSeries("reauth", "error")); n > 0 {
		note("%v of kproxy's SASL authentications failed", n)
	}
	opened := kp.Metric(t, "kproxy_connections_total")
	conns := map[string]*conn{} // by client address
	var all []*conn
	var warnings []string
	for _, line := range strings.Split(kp.Output(), "\n") {
		if strings.Contains(line, `"level":"warn"`) || strings.Contains(line, `"level":"error"`) {
			warnings = append(warnings, line)
		}
		if !strings.Contains(line, `"connection `) {
			continue
		}
		var l connLine
		brace := strings.Index(line, "{")
		if brace < 0 || json.Unmarshal([]byte(line[brace:]), &l) != nil {
			continue
		}
		switch l.Message {
		case "connection opened":
			c := &conn{order: len(all)}
			conns[l.Client] = c
			all = append(all, c)
		case "connection closed":
			if c := conns[l.Client]; c != nil && c.closed == nil {
				c.closed, c.closedAfter = &l, len(all)
			}
		}
	}
	busy, reconnects := 0, 0
	lost, lostAt := "", len(all) // the first connection lost, and the openings before its end
	var lives []string
	for _, c := range all {
		if c.closed == nil {
			note("kproxy logged no end of a connection it opened")
			continue
		}
		life := c.life()
		lives = append(lives, fmt.Sprintf("%v/%d", life.Round(time.Second), c.closed.Requests))
		if life >= time.Duration(col.minReauths)*col.lifetime && c.closed.Requests > originationBusyRequests {
			busy++
		}
		why := ""
		switch {
		case c.closed.Reason != "client closed":
			note("a connection was closed by kproxy or the broker after %v (%s: %s)", life.Round(time.Millisecond), c.closed.Reason, c.closed.Error)
			why = c.closed.Reason
		case c.closed.Failed > 0 && life >= col.lifetime:
			why = fmt.Sprintf("the client gave up a connection with %d requests unanswered after %v", c.closed.Failed, life.Round(time.Millisecond))
		}
		if why != "" && c.closedAfter < lostAt {
			lost, lostAt = why, c.closedAfter
		}
	}
	for _, c := range all {
		if c.order >= lostAt && c.closed != nil && c.closed.Requests > originationBusyRequests {
			reconnects++
		}
	}
	t.Logf("%s (%s): %v connections (lifetime/requests %v), authentications: %v initial, %v re-authentications",
		p.name, p.mechanism, opened, lives, initialOK, reauthOK)
	switch {
	case float64(len(all)) != opened:
		note("kproxy accepted %v connections but logged the opening of %d (the others failed before relaying?)", opened, len(all))
	case reconnects > 0:
		note("%d connections took over the traffic after %s: reconnects", reconnects, lost)
	case busy == 0:
		note("no connection lived %v (%d session lifetimes) with more than %d requests although the client ran for %v",
			time.Duration(col.minReauths)*col.lifetime, col.minReauths, originationBusyRequests, col.run)
	case reauthOK < float64(col.minReauths*busy):
		note("%v re-authentications for %d connections that each lived %d session lifetimes in use: want at least %d each",
			reauthOK, busy, col.minReauths, col.minReauths)
	}
	if len(problems) == 0 {
		return nil
	}
	if len(warnings) > 3 {
		warnings = warnings[:3]
	}
	if len(warnings) > 0 {
		problems = append(problems, "kproxy's first warnings: "+strings.Join(warnings, " | "))
	}
	return errors.New(strings.Join(problems, "; "))
}

// requireTokenSessions checks, direct to each slot's JWT listener with a
// token Hydra issued, that Kafka validates it and ends the session at
// the token's expiry: otherwise no oauth cell would see a
// re-authentication and each would pass for nothing.
func requireTokenSessions(t *testing.T, k *harness.Kafka) {
	h := k.Origination.Issuer
	tok, err := h.Token()
	if err != nil {
		t.Fatal(err)
	}
	mech := oauth.Auth{Token: tok}.AsMechanism()
	for i, s := range k.Origination.Slots {
		for _, addr := range []string{s.JWT, s.JWT2} {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			life, err := harness.SessionLifetime(ctx, addr, nil, mech)
			cancel()
			switch {
			case err != nil:
				t.Errorf("slot %d: OAUTHBEARER with a Hydra token at %s: %v", i, addr, err)
			case life <= 0 || life > harness.HydraTokenLifetime:
				t.Errorf("slot %d: the broker granted a session lifetime of %v, want the token's remaining lifetime (at most %v)", i, life, harness.HydraTokenLifetime)
			}
		}
	}
	t.Logf("%d slots: every JWT listener validates Hydra's tokens and ends sessions at their expiry", len(k.Origination.Slots))
}
