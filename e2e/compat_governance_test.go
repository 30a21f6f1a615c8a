package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kproxy/kproxy/e2e/harness"
	"github.com/kproxy/kproxy/e2e/kclients"
)

// The governance column: the client library through a kproxy with two
// require rules (docs/governance.md) and the audit log on (docs/audit.md),
// in front of a broker listener of its own that advertises it:
//
//   - acks-all: a Produce to a gov-* topic must ask for acks=all. The
//     library's producer with acks=1 must fail with its own form of
//     INVALID_REQUIRED_ACKS, leaving the topic empty; the same records
//     with acks=all must then succeed, and a consumer group must read
//     each of them exactly once (the log holds as many offsets as
//     records: nothing of the refused produce was written).
//   - topic-standards: CreateTopics must ask for at least 3 partitions.
//     With a library that has an admin client, creating the cell's admin
//     topic with 1 partition must fail with its form of POLICY_VIOLATION
//     and the rule's message (the Java AdminClient raises
//     PolicyViolationException) and leave no topic on the broker;
//     creating it with 3 partitions must succeed (so the first attempt
//     left nothing behind: the name was free) and the broker must
//     describe 3 partitions; deleting it must succeed and the broker
//     must stop listing it.
//
// Then kproxy's audit log must hold, for the cell's topics, exactly one
// line per Produce the rule refused (as many as kproxy counted in
// kproxy_policy_rejected_total), each refused with INVALID_REQUIRED_ACKS
// by acks-all, and nothing about the acks=all produce; with the admin
// part, exactly two CreateTopics lines (the refusal, POLICY_VIOLATION by
// topic-standards with its message, then NONE) and one DeleteTopics line
// (NONE): the broker's own outcomes, checked above against what the
// broker did.
//
// The direct run is the control: the broker itself takes acks=1 (the
// records are in the log) and, with an admin client, a topic of 1
// partition, which it then deletes. The refusals are kproxy's.

const (
	governanceService = "kproxy-governance"
	governanceRecords = 200
	// governancePrefix starts the topics the acks-all rule selects.
	governancePrefix  = "gov-"
	governanceMinPart = 3
	// governanceAuditWait bounds the wait for kproxy's audit writer,
	// which writes lines off the request path.
	governanceAuditWait = 30 * time.Second

	ruleAcks   = "acks-all"
	ruleTopics = "topic-standards"
)

// governanceYAML is the column's kproxy configuration; %s is the audit
// log's path.
const governanceYAML = `policies:
  rules:
    - name: ` + ruleAcks + `
      match: {apis: [Produce], topics: ["` + governancePrefix + `*"]}
      require: {acks: all}
      action: reject
    - name: ` + ruleTopics + `
      match: {apis: [CreateTopics]}
      require:
        partitions: {min: 3}
      action: reject
audit:
  enabled: true
  output: %s
`

// What kproxy answers and logs, as docs/governance.md spells it.
var (
	acksMessage   = "rule " + ruleAcks + ": acks 1, must be all"
	topicsMessage = fmt.Sprintf("rule %s: partitions 1 below min %d", ruleTopics, governanceMinPart)
)

// governanceFixture is the column's kproxy, shared by its cells (which
// run one at a time), and the audit log it writes.
type governanceFixture struct {
	kproxy *harness.Kproxy
	audit  string
}

func startGovernanceFixture(t *testing.T, k *harness.Kafka) *governanceFixture {
	t.Helper()
	dir := t.TempDir()
	f := &governanceFixture{audit: filepath.Join(dir, "audit.log")}
	config := filepath.Join(dir, governanceService+".yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(governanceYAML, f.audit)), 0o600); err != nil {
		t.Fatal(err)
	}
	f.kproxy = harness.StartKproxy(t, governanceService, k.ProxyGovernance, k.Governance, "--config", config)
	return f
}

func (f *governanceFixture) kproxies() []*harness.Kproxy {
	if f == nil {
		return nil
	}
	return []*harness.Kproxy{f.kproxy}
}

// governanceNote is what a governance cell of d leaves out, for its
// note: the admin part without an admin client, the message check when
// the admin client drops the broker's message.
func governanceNote(d kclients.Driver) string {
	if why := d.Unsupported(kclients.Admin); why != "" {
		return why
	}
	return d.Unsupported(kclients.AdminMessage)
}

// governanceCell is the column's cell (see the column's comment).
func (c *cell) governanceCell() error {
	k := c.env.kafka
	topic := governancePrefix + c.topic
	admin := c.topic + "-admin"
	k.CreateTopic(c.t, topic, compatParts)
	recs := records(topic, governanceRecords)
	ctx, cancel := c.ctx()
	defer cancel()
	adm := k.Admin(c.t)
	conn := c.conn("")
	withAdmin := c.driver.Unsupported(kclients.Admin) == ""
	if !withAdmin {
		c.t.Logf("%s: no admin part: %s", c.path.name, c.driver.Unsupported(kclients.Admin))
	}

	if !c.path.proxied {
		if err := c.driver.Produce(ctx, kclients.ProduceOpts{Conn: conn, Topic: topic, Acks: "1", Compression: "none"}, recs); err != nil {
			return fmt.Errorf("produce with acks=1 to the broker: %w", err)
		}
		if n := k.EndOffsets(c.t, topic); n != int64(len(recs)) {
			return fmt.Errorf("the broker took acks=1 but the log holds %d offsets, want %d", n, len(recs))
		}
		if !withAdmin {
			return nil
		}
		if err := c.driver.CreateTopic(ctx, conn, admin, 1); err != nil {
			return fmt.Errorf("create %s with 1 partition on the broker: %w", admin, err)
		}
		if err := awaitPartitions(ctx, adm, admin, 1); err != nil {
			return err
		}
		if err := c.driver.DeleteTopic(ctx, conn, admin); err != nil {
			return fmt.Errorf("delete %s on the broker: %w", admin, err)
		}
		return awaitTopicGone(ctx, adm, admin)
	}

	f := c.env.governance
	refusedSeries := `kproxy_policy_rejected_total{rule="` + ruleAcks + `"}`
	refusedBefore := f.kproxy.Metric(c.t, refusedSeries)

	err := c.driver.Produce(ctx, kclients.ProduceOpts{Conn: conn, Topic: topic, Acks: "1", Compression: "none"}, recs)
	switch {
	case err == nil:
		return fmt.Errorf("produce with acks=1 through kproxy succeeded: want INVALID_REQUIRED_ACKS from rule %s", ruleAcks)
	case !invalidRequiredAcks(err):
		return fmt.Errorf("produce with acks=1 through kproxy failed, but not with INVALID_REQUIRED_ACKS: %w", err)
	}
	c.t.Logf("%s: acks=1 refused: %s", c.path.name, brief(err))
	if n := k.EndOffsets(c.t, topic); n != 0 {
		return fmt.Errorf("the refused acks=1 produce left %d offsets in the log, want 0", n)
	}
	if err := c.driver.Produce(ctx, kclients.ProduceOpts{Conn: conn, Topic: topic, Acks: "all", Compression: "none"}, recs); err != nil {
		return fmt.Errorf("produce with acks=all after the refusal: %w", err)
	}
	got, err := c.driver.Consume(ctx, kclients.ConsumeOpts{Conn: conn, Topic: topic, Group: topic,
		Count: len(recs), Timeout: compatTimeout, Protocol: "classic", Members: 1})
	if err != nil {
		return fmt.Errorf("consume: %w", err)
	}
	sum, err := check(recs, got, true, nil)
	if err != nil {
		return err
	}
	if n := k.EndOffsets(c.t, topic); n != int64(len(recs)) {
		return fmt.Errorf("the log holds %d offsets, want the %d acks=all records only", n, len(recs))
	}
	refused := int(f.kproxy.Metric(c.t, refusedSeries) - refusedBefore)
	if refused < 1 {
		return fmt.Errorf("the acks=1 produce failed but kproxy counted no refusal by %s", ruleAcks)
	}
	c.t.Logf("%s: %d records once after %d refused Produce requests, digest %s", c.path.name, len(recs), refused, sum)

	if withAdmin {
		if err := c.governanceAdmin(ctx, adm, conn, admin); err != nil {
			return err
		}
	}

	id, err := topicID(ctx, adm, topic)
	if err != nil {
		return err
	}
	want := auditWant{produce: refused}
	if withAdmin {
		want.creates, want.deletes = 2, 1
	}
	return f.checkAudit(c.t, topic, id, admin, want)
}

// governanceAdmin is the admin part through kproxy: 1 partition refused,
// 3 created, deleted, each checked on the broker.
func (c *cell) governanceAdmin(ctx context.Context, adm *kadm.Client, conn kclients.Conn, topic string) error {
	err := c.driver.CreateTopic(ctx, conn, topic, 1)
	switch {
	case err == nil:
		return fmt.Errorf("create %s with 1 partition through kproxy succeeded: want POLICY_VIOLATION from rule %s", topic, ruleTopics)
	case !policyViolation(err):
		return fmt.Errorf("create %s with 1 partition through kproxy failed, but not with POLICY_VIOLATION: %w", topic, err)
	case c.driver.Unsupported(kclients.AdminMessage) == "" && !strings.Contains(err.Error(), topicsMessage):
		return fmt.Errorf("create %s with 1 partition through kproxy: POLICY_VIOLATION without the rule's message %q: %w", topic, topicsMessage, err)
	}
	c.t.Logf("%s: create with 1 partition refused: %s", c.path.name, brief(err))
	if listed, err := topicListed(ctx, adm, topic); err != nil || listed {
		return fmt.Errorf("after the refused create, the broker lists %s: %v (%v)", topic, listed, err)
	}
	if err := c.driver.CreateTopic(ctx, conn, topic, governanceMinPart); err != nil {
		return fmt.Errorf("create %s with %d partitions through kproxy: %w", topic, governanceMinPart, err)
	}
	if err := awaitPartitions(ctx, adm, topic, governanceMinPart); err != nil {
		return err
	}
	if err := c.driver.DeleteTopic(ctx, conn, topic); err != nil {
		return fmt.Errorf("delete %s through kproxy: %w", topic, err)
	}
	return awaitTopicGone(ctx, adm, topic)
}

// normalized is s in lower case with only its letters and digits, so that
// INVALID_REQUIRED_ACKS, InvalidRequiredAcksException and "Invalid
// Required Acks" read alike.
func normalized(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// invalidRequiredAcks says whether err is a library's form of Kafka's
// INVALID_REQUIRED_ACKS (code 21): its name in any spelling (Java,
// franz-go, kafka-go, librdkafka, kafkajs' type), or sarama's
// description of the code.
func invalidRequiredAcks(err error) bool {
	s := normalized(err.Error())
	return strings.Contains(s, "invalidrequiredacks") ||
		strings.Contains(s, normalized("The number of required acks is invalid"))
}

// policyViolation says the same of POLICY_VIOLATION (code 44), with
// sarama's description of it.
func policyViolation(err error) bool {
	s := normalized(err.Error())
	return strings.Contains(s, "policyviolation") ||
		strings.Contains(s, normalized("Request parameters do not satisfy the configured policy"))
}

// brief is err on one line, cut for the test log.
func brief(err error) string {
	s := strings.Join(strings.Fields(err.Error()), " ")
	if len(s) > 400 {
		s = s[:400] + "..."
	}
	return s
}

// topicListed says whether the broker lists topic.
func topicListed(ctx context.Context, adm *kadm.Client, topic string) (bool, error) {
	td, err := adm.ListTopics(ctx)
	return td.Has(topic), err
}

// awaitPartitions waits until the broker describes topic, then requires
// want partitions: a created topic reaches the metadata a moment after
// the broker answered.
func awaitPartitions(ctx context.Context, adm *kadm.Client, topic string, want int) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		td, err := adm.ListTopics(ctx, topic)
		if err == nil {
			err = td[topic].Err
		}
		if err == nil {
			if n := len(td[topic].Partitions); n != want {
				return fmt.Errorf("the broker describes %s with %d partitions, want %d", topic, n, want)
			}
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("the broker does not describe %s 30s after its creation: %w", topic, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// awaitTopicGone waits until the broker no longer lists topic.
func awaitTopicGone(ctx context.Context, adm *kadm.Client, topic string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		listed, err := topicListed(ctx, adm, topic)
		if err == nil && !listed {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("the broker still lists %s 30s after its deletion (%v)", topic, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// topicID is topic's id as audit lines spell it (base64url, no padding),
// for a Produce that names its topics by id (v13+).
func topicID(ctx context.Context, adm *kadm.Client, topic string) (string, error) {
	td, err := adm.ListTopics(ctx, topic)
	if err == nil {
		err = td[topic].Err
	}
	if err != nil {
		return "", fmt.Errorf("describing %s: %w", topic, err)
	}
	id := td[topic].ID
	return base64.RawURLEncoding.EncodeToString(id[:]), nil
}

// auditLine and auditResource are the fields of docs/audit.md the cell
// reads.
type auditLine struct {
	Time      string          `json:"time"`
	Client    string          `json:"client"`
	ClientID  string          `json:"client_id"`
	API       string          `json:"api"`
	Version   int             `json:"version"`
	Outcome   string          `json:"outcome"`
	Error     string          `json:"error"`
	Rule      string          `json:"rule"`
	Message   string          `json:"message"`
	Resources []auditResource `json:"resources"`
}

type auditResource struct {
	Type              string `json:"type"`
	Name              string `json:"name"`
	ID                string `json:"id"`
	NumPartitions     int32  `json:"num_partitions"`
	ReplicationFactor int16  `json:"replication_factor"`
	Outcome           string `json:"outcome"`
	Rule              string `json:"rule"`
	Message           string `json:"message"`
}

// naming are the resources of l that name topic (by name, or by id).
func (l auditLine) naming(topic, id string) []auditResource {
	var rs []auditResource
	for _, r := range l.Resources {
		if r.Type == "topic" && (r.Name == topic || id != "" && (r.Name == id || r.ID == id)) {
			rs = append(rs, r)
		}
	}
	return rs
}

func (l auditLine) String() string {
	b, _ := json.Marshal(l)
	return string(b)
}

// auditWant is how many lines a cell expects: Produce refusals, and
// CreateTopics and DeleteTopics of its admin topic.
type auditWant struct{ produce, creates, deletes int }

// readAudit parses every whole line of the audit log (a line still being
// written, with no newline yet, is left for the next read).
func (f *governanceFixture) readAudit() ([]auditLine, error) {
	b, err := os.ReadFile(f.audit)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[:i+1]
	} else {
		b = nil
	}
	var ls []auditLine
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for n := 1; sc.Scan(); n++ {
		var l auditLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return nil, fmt.Errorf("%s line %d is not a JSON audit line: %v: %.200q", f.audit, n, err, sc.Text())
		}
		ls = append(ls, l)
	}
	return ls, sc.Err()
}

// checkAudit waits until the audit log holds the lines want counts for
// topic (id: its topic id) and admin, then checks that it holds exactly
// those, each with the outcome the broker or kproxy gave.
func (f *governanceFixture) checkAudit(t *testing.T, topic, id, admin string, want auditWant) error {
	var produces, creates, deletes, others []auditLine
	deadline := time.Now().Add(governanceAuditWait)
	for {
		ls, err := f.readAudit()
		if err != nil {
			return err
		}
		produces, creates, deletes, others = nil, nil, nil, nil
		for _, l := range ls {
			onTopic, onAdmin := len(l.naming(topic, id)) > 0, len(l.naming(admin, "")) > 0
			switch {
			case onTopic && l.API == "Produce":
				produces = append(produces, l)
			case onAdmin && l.API == "CreateTopics":
				creates = append(creates, l)
			case onAdmin && l.API == "DeleteTopics":
				deletes = append(deletes, l)
			case onTopic || onAdmin:
				others = append(others, l)
			}
		}
		if len(produces) >= want.produce && len(creates) >= want.creates && len(deletes) >= want.deletes {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %v the audit log holds %d Produce lines for %s (kproxy refused %d), %d CreateTopics and %d DeleteTopics lines for %s (want %d and %d)",
				governanceAuditWait, len(produces), topic, want.produce, len(creates), len(deletes), admin, want.creates, want.deletes)
		}
		time.Sleep(200 * time.Millisecond)
	}
	switch {
	case len(others) > 0:
		return fmt.Errorf("the audit log holds %d lines for the cell's topics that are neither a refused Produce nor a CreateTopics or DeleteTopics of %s; first: %s", len(others), admin, others[0])
	case len(produces) != want.produce:
		return fmt.Errorf("the audit log holds %d Produce lines for %s, want one per refused Produce (%d): the acks=all produce must leave none", len(produces), topic, want.produce)
	case len(creates) != want.creates || len(deletes) != want.deletes:
		return fmt.Errorf("the audit log holds %d CreateTopics and %d DeleteTopics lines for %s, want %d and %d", len(creates), len(deletes), admin, want.creates, want.deletes)
	}
	for _, l := range produces {
		if l.Outcome != "refused" || l.Error != "INVALID_REQUIRED_ACKS" || l.Rule != ruleAcks || l.Message != acksMessage {
			return fmt.Errorf("Produce line: want outcome refused, error INVALID_REQUIRED_ACKS, rule %s, message %q; got %s", ruleAcks, acksMessage, l)
		}
		for _, r := range l.naming(topic, id) {
			if r.Outcome != "INVALID_REQUIRED_ACKS" || r.Rule != ruleAcks {
				return fmt.Errorf("Produce line: topic %s: want outcome INVALID_REQUIRED_ACKS by rule %s; got %s", topic, ruleAcks, l)
			}
		}
	}
	if want.creates > 0 {
		// In the order the requests were made, which is the order kproxy
		// finished them (each answered before the next was sent).
		refused, created, deleted := creates[0], creates[1], deletes[0]
		r := refused.naming(admin, "")[0]
		if refused.Outcome != "refused" || r.Outcome != "POLICY_VIOLATION" || r.Rule != ruleTopics || r.Message != topicsMessage || r.NumPartitions != 1 {
			return fmt.Errorf("first CreateTopics line: want outcome refused, %s with 1 partition POLICY_VIOLATION by rule %s, message %q; got %s", admin, ruleTopics, topicsMessage, refused)
		}
		r = created.naming(admin, "")[0]
		if created.Outcome != "ok" || r.Outcome != "NONE" || r.Rule != "" || r.NumPartitions != governanceMinPart {
			return fmt.Errorf("second CreateTopics line: want outcome ok, %s with %d partitions NONE (the broker created it); got %s", admin, governanceMinPart, created)
		}
		if r := deleted.naming(admin, "")[0]; deleted.Outcome != "ok" || r.Outcome != "NONE" {
			return fmt.Errorf("DeleteTopics line: want outcome ok, %s NONE (the broker deleted it); got %s", admin, deleted)
		}
	}
	t.Logf("kproxy: audit log: %d refused Produce lines for %s (Produce v%d), %d CreateTopics and %d DeleteTopics lines for %s, as the broker did",
		len(produces), topic, produces[0].Version, len(creates), len(deletes), admin)
	return nil
}
