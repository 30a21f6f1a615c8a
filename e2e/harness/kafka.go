package harness

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Environment set by e2e/run.sh, which fetches the brokers with Maven.
const (
	// KafkaVersionsEnv lists the Apache Kafka versions to test, newest
	// first ("4.4.0 3.9.2"). The first runs every scenario; the others
	// run the core ones.
	KafkaVersionsEnv = "KPROXY_E2E_KAFKA_VERSIONS"
	// CacheEnv is the download cache: CACHE/kafka-V/libs holds the jars
	// of version V (broker, tools and Java client).
	CacheEnv = "KPROXY_E2E_CACHE"
)

// Users the brokers know. PLAIN users live in the broker's JAAS config,
// SCRAM users are written into the metadata log when storage is formatted.
const (
	PlainUser     = "alice"
	PlainPassword = "alice-secret"
	ScramUser     = "bob"
	ScramPassword = "bob-secret"
)

// KafkaVersions is $KPROXY_E2E_KAFKA_VERSIONS, newest first; the test
// fails with what to run when it is unset.
func KafkaVersions(t testing.TB) []string {
	t.Helper()
	v := strings.Fields(os.Getenv(KafkaVersionsEnv))
	if len(v) == 0 || os.Getenv(CacheEnv) == "" {
		t.Fatalf("%s and %s are not set: run the suite with `bash e2e/run.sh` from the repository root; "+
			"it fetches Apache Kafka from Maven Central (Maven and a JDK 17+ must be installed) and sets them", KafkaVersionsEnv, CacheEnv)
	}
	return v
}

// KafkaLibs is the folder of jars for version, failing the test when
// run.sh has not fetched it.
func KafkaLibs(t testing.TB, version string) string {
	t.Helper()
	dir := filepath.Join(os.Getenv(CacheEnv), "kafka-"+version, "libs")
	if m, _ := filepath.Glob(filepath.Join(dir, "kafka_2.13-*.jar")); len(m) == 0 {
		t.Fatalf("no Apache Kafka %s jars in %s: run `bash e2e/run.sh`, which fetches them with Maven", version, dir)
	}
	return dir
}

// Java is the java command, failing the test when there is none.
func Java(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("java")
	if err != nil {
		t.Fatal("java is not on PATH: install a JDK 17+ (Debian: apt-get install openjdk-17-jdk-headless)")
	}
	return p
}

// Kafka is a single-node KRaft Apache Kafka broker on 127.0.0.1 with
// fourteen listeners (and those of WithOrigination): DIRECT and
// DIRECTSASL advertise their own address (the control path), PROXIED and
// PROXIEDSASL advertise kproxy's address, as a sidecar deployment does,
// so clients that bootstrap through kproxy stay behind it; the stitch and
// governance listeners advertise the addresses of those columns' kproxies;
// TLS holds the six listeners of the TLS cells.
type Kafka struct {
	*Proc
	Version string
	Libs    string

	Direct      string // PLAINTEXT, advertised as itself
	DirectSASL  string // SASL_PLAINTEXT (PLAIN, SCRAM-SHA-512), as itself
	Proxied     string // PLAINTEXT, advertised as ProxyAddr
	ProxiedSASL string // SASL_PLAINTEXT, advertised as ProxySASLAddr

	// Where kproxy must listen for the advertised addresses to be right.
	ProxyAddr, ProxySASLAddr string

	// StitchProduce and StitchConsume are PLAINTEXT listeners advertised
	// as ProxyStitchProduce and ProxyStitchConsume: the trace-stitch
	// cells produce through one kproxy and consume through another, each
	// a broker-pod sidecar of its own listener.
	StitchProduce, StitchConsume           string
	ProxyStitchProduce, ProxyStitchConsume string

	// Governance is a PLAINTEXT listener advertised as ProxyGovernance,
	// where the governance cells' kproxy (policy require rules and the
	// audit log) listens.
	Governance, ProxyGovernance string

	TLS KafkaTLS
	// Origination holds the sasl-origination cells' listeners, one slot
	// per cell; none unless started WithOrigination.
	Origination KafkaOrigination

	controller string
	dir        string // config and data
}

// StartKafka formats storage and starts a broker of version, with free
// ports for its listeners and for the kproxy addresses it advertises, and
// a new test PKI for its SSL listeners.
// It returns once the broker answers Metadata on its DIRECT listener.
// A port taken by another process between FreePorts and the broker's
// bind (an outgoing connection can take any port of the ephemeral range)
// costs a retry with new ports, not the test.
func StartKafka(t testing.TB, version string, opts ...KafkaOption) *Kafka {
	t.Helper()
	var o kafkaOptions
	for _, opt := range opts {
		opt(&o)
	}
	for attempt := 1; ; attempt++ {
		k, err := startKafka(t, version, o)
		if err == nil {
			return k
		}
		if attempt == 3 || !portTaken(k.Proc) {
			t.Fatal(err)
		}
		t.Logf("Kafka %s lost a port race (attempt %d); retrying with new ports", version, attempt)
	}
}

// portTaken says whether p exited because a port it binds was taken.
func portTaken(p *Proc) bool {
	if p == nil {
		return false
	}
	select {
	case <-p.Exited():
		return strings.Contains(p.Output(), "Address already in use")
	default:
		return false
	}
}

// KafkaOption adds to the broker StartKafka starts.
type KafkaOption func(*kafkaOptions)

type kafkaOptions struct {
	originationSlots int
	issuer           *Hydra
}

// WithOAuthIssuer gives each origination slot a listener validating
// h's JWTs (OriginationSlot.JWT); h must be running before the broker
// starts, which fetches its keys.
func WithOAuthIssuer(h *Hydra) KafkaOption {
	return func(o *kafkaOptions) { o.issuer = h }
}

// WithOrigination adds slots sets of sasl-origination listeners
// (Kafka.Origination), one per cell that may run at once. They cost the
// other tests nothing, so only the brokers that run those cells have them.
func WithOrigination(slots int) KafkaOption {
	return func(o *kafkaOptions) { o.originationSlots = slots }
}

func startKafka(t testing.TB, version string, o kafkaOptions) (*Kafka, error) {
	t.Helper()
	p := FreePorts(t, 13+kafkaTLSPorts+o.originationSlots*originationPortsPerSlot)
	k := &Kafka{
		Version:       version,
		Libs:          KafkaLibs(t, version),
		Direct:        fmt.Sprintf("127.0.0.1:%d", p[0]),
		controller:    fmt.Sprintf("127.0.0.1:%d", p[1]),
		Proxied:       fmt.Sprintf("127.0.0.1:%d", p[2]),
		DirectSASL:    fmt.Sprintf("127.0.0.1:%d", p[3]),
		ProxiedSASL:   fmt.Sprintf("127.0.0.1:%d", p[4]),
		ProxyAddr:     fmt.Sprintf("127.0.0.1:%d", p[5]),
		ProxySASLAddr: fmt.Sprintf("127.0.0.1:%d", p[6]),
		TLS:           newKafkaTLS(t, p[7:7+kafkaTLSPorts]),

		StitchProduce:      fmt.Sprintf("127.0.0.1:%d", p[7+kafkaTLSPorts]),
		StitchConsume:      fmt.Sprintf("127.0.0.1:%d", p[8+kafkaTLSPorts]),
		ProxyStitchProduce: fmt.Sprintf("127.0.0.1:%d", p[9+kafkaTLSPorts]),
		ProxyStitchConsume: fmt.Sprintf("127.0.0.1:%d", p[10+kafkaTLSPorts]),
		Governance:         fmt.Sprintf("127.0.0.1:%d", p[11+kafkaTLSPorts]),
		ProxyGovernance:    fmt.Sprintf("127.0.0.1:%d", p[12+kafkaTLSPorts]),
		Origination:        newKafkaOrigination(p[13+kafkaTLSPorts:], o.issuer),
		dir:                t.TempDir(),
	}
	props := filepath.Join(k.dir, "server.properties")
	if err := os.WriteFile(props, []byte(k.properties(t)), 0o644); err != nil {
		t.Fatal(err)
	}
	// A cluster id that starts with '-' reads as an option to the storage
	// tool ("--cluster-id: expected one argument"), one time in 64; Kafka's
	// own random ids skip those, and so does this.
	id := make([]byte, 16)
	clusterID := "-"
	for clusterID[0] == '-' {
		rand.Read(id)
		clusterID = base64.RawURLEncoding.EncodeToString(id)
	}
	format := exec.Command(Java(t), append(k.jvmArgs(), "kafka.tools.StorageTool", "format",
		"-t", clusterID, "-c", props,
		"--add-scram", fmt.Sprintf("SCRAM-SHA-512=[name=%s,password=%s]", ScramUser, ScramPassword))...)
	if out, err := format.CombinedOutput(); err != nil {
		t.Fatalf("formatting Kafka %s storage: %v\n%s", version, err, out)
	}
	return k, k.start(t)
}

func (k *Kafka) start(t testing.TB) error {
	t.Helper()
	start := time.Now()
	args := append(k.jvmArgs(), "-Xms256m", "-Xmx768m", "kafka.Kafka", filepath.Join(k.dir, "server.properties"))
	k.Proc = Start(t, "kafka-"+k.Version, Java(t), args, Env(), k.dir)
	if err := k.waitReady(90 * time.Second); err != nil {
		return fmt.Errorf("Kafka %s did not come up: %v\n%s", k.Version, err, k.Tail(40))
	}
	t.Logf("Kafka %s ready in %v (direct %s, proxied %s → kproxy %s, sasl %s → kproxy %s)",
		k.Version, time.Since(start).Round(time.Millisecond), k.Direct, k.Proxied, k.ProxyAddr, k.ProxiedSASL, k.ProxySASLAddr)
	return nil
}

// Restart stops the broker with SIGTERM (a controlled shutdown) and starts
// it again on the same ports and data.
func (k *Kafka) Restart(t testing.TB) {
	t.Helper()
	if err := k.Stop(syscall.SIGTERM, 60*time.Second); err != nil {
		t.Logf("Kafka %s exit after SIGTERM: %v", k.Version, err)
	}
	if err := k.start(t); err != nil {
		t.Fatal(err)
	}
}

// waitReady polls Metadata on the DIRECT listener until the broker lists
// itself, or the process dies, or timeout passes.
func (k *Kafka) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-k.Exited():
			return fmt.Errorf("broker exited: %v", k.ExitErr())
		default:
		}
		last = k.ping()
		if last == nil {
			return nil
		}
		time.Sleep(300 * time.Millisecond)
	}
	return fmt.Errorf("no Metadata answer in %v: %v", timeout, last)
}

func (k *Kafka) ping() error { return pingBrokers(k.Direct, 1) }

// pingBrokers asks the broker at addr for metadata and says why it is not
// ready yet: no answer, fewer than want brokers listed, or no controller.
func pingBrokers(addr string, want int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	m, err := kadm.NewClient(cl).BrokerMetadata(ctx)
	if err != nil {
		return err
	}
	if len(m.Brokers) < want || m.Controller < 0 {
		return fmt.Errorf("metadata lists %d brokers (want %d), controller %d", len(m.Brokers), want, m.Controller)
	}
	return nil
}

// Admin is a franz-go admin client on the DIRECT listener, closed with the test.
func (k *Kafka) Admin(t testing.TB) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Direct))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// CreateTopic creates topic with partitions on the DIRECT listener and
// waits until every partition's leader answers ListOffsets for it: a
// broker acknowledges the creation before it serves the partitions, and an
// acks=0 producer would lose records sent in between without a sign.
func (k *Kafka) CreateTopic(t testing.TB, topic string, partitions int32) {
	t.Helper()
	createTopic(t, []string{k.Direct}, topic, partitions, 1)
}

// createTopic creates topic through seeds with a client of its own,
// closed before it returns, and waits until every partition is served.
func createTopic(t testing.TB, seeds []string, topic string, partitions int32, replicationFactor int16) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	resp, err := adm.CreateTopic(ctx, partitions, replicationFactor, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("creating topic %s: %v", topic, err)
	}
	for {
		offs, err := adm.ListEndOffsets(ctx, topic)
		ready := 0
		if err == nil {
			offs.Each(func(o kadm.ListedOffset) {
				if o.Err == nil {
					ready++
				}
			})
		}
		if ready == int(partitions) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("topic %s: %d of %d partitions served 30s after creation (%v)", topic, ready, partitions, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (k *Kafka) jvmArgs() []string {
	args := []string{
		"-cp", filepath.Join(k.Libs, "*"),
		"-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
		"-Djava.security.egd=file:/dev/urandom",
	}
	if h := k.Origination.Issuer; h != nil {
		// Kafka fetches OAuth keys only from the URLs this lists.
		args = append(args, "-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls="+h.JWKSURL)
	}
	return args
}

// listener is one of the broker's listeners.
type listener struct {
	name, addr string
	advertised string // "" for the controller's, which is not advertised
	protocol   string // PLAINTEXT, SASL_PLAINTEXT, SSL or SASL_SSL
}

func (k *Kafka) properties(t testing.TB) string {
	ls := append([]listener{
		{"DIRECT", k.Direct, k.Direct, "PLAINTEXT"},
		{"CONTROLLER", k.controller, "", "PLAINTEXT"},
		{"PROXIED", k.Proxied, k.ProxyAddr, "PLAINTEXT"},
		{"DIRECTSASL", k.DirectSASL, k.DirectSASL, "SASL_PLAINTEXT"},
		{"PROXIEDSASL", k.ProxiedSASL, k.ProxySASLAddr, "SASL_PLAINTEXT"},
		{"STITCHPRODUCE", k.StitchProduce, k.ProxyStitchProduce, "PLAINTEXT"},
		{"STITCHCONSUME", k.StitchConsume, k.ProxyStitchConsume, "PLAINTEXT"},
		{"GOVERNANCE", k.Governance, k.ProxyGovernance, "PLAINTEXT"},
	}, append(k.TLS.listeners(), k.Origination.listeners()...)...)
	var listeners, advertised, protocols []string
	for _, l := range ls {
		listeners = append(listeners, l.name+"://"+l.addr)
		if l.advertised != "" {
			advertised = append(advertised, l.name+"://"+l.advertised)
		}
		protocols = append(protocols, l.name+":"+l.protocol)
	}
	jaasPlain := fmt.Sprintf(`org.apache.kafka.common.security.plain.PlainLoginModule required user_%s="%s";`, PlainUser, PlainPassword)
	jaasScram := `org.apache.kafka.common.security.scram.ScramLoginModule required;`
	lines := []string{
		"process.roles=broker,controller",
		"node.id=1",
		"controller.quorum.voters=1@" + k.controller,
		"controller.listener.names=CONTROLLER",
		"inter.broker.listener.name=DIRECT",
		"listeners=" + strings.Join(listeners, ","),
		"advertised.listeners=" + strings.Join(advertised, ","),
		"listener.security.protocol.map=" + strings.Join(protocols, ","),
		"sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512",
		"listener.name.directsasl.plain.sasl.jaas.config=" + jaasPlain,
		"listener.name.proxiedsasl.plain.sasl.jaas.config=" + jaasPlain,
		"listener.name.directsasl.scram-sha-512.sasl.jaas.config=" + jaasScram,
		"listener.name.proxiedsasl.scram-sha-512.sasl.jaas.config=" + jaasScram,
		"log.dirs=" + filepath.Join(k.dir, "data"),
		"num.partitions=4",
		"offsets.topic.replication.factor=1",
		"offsets.topic.num.partitions=4",
		"transaction.state.log.replication.factor=1",
		"transaction.state.log.min.isr=1",
		"transaction.state.log.num.partitions=4",
		"share.coordinator.state.topic.replication.factor=1",
		"share.coordinator.state.topic.min.isr=1",
		"group.initial.rebalance.delay.ms=0",
		"auto.create.topics.enable=false",
		"log.flush.interval.messages=1000000",
	}
	lines = append(lines, k.TLS.properties(t)...)
	lines = append(lines, k.Origination.properties()...)
	return strings.Join(lines, "\n") + "\n"
}

// WaitGroupMembers waits until classic consumer group is Stable with n
// members that each hold at least one partition.
func (k *Kafka) WaitGroupMembers(ctx context.Context, group string, n int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Direct))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	last := "not described yet"
	for {
		gs, err := adm.DescribeGroups(ctx, group)
		if err == nil {
			g := gs[group]
			withParts := 0
			for _, m := range g.Members {
				if ca, ok := m.Assigned.AsConsumer(); ok && len(ca.Topics) > 0 {
					withParts++
				}
			}
			if g.Err == nil && g.State == "Stable" && len(g.Members) == n && withParts == n {
				return nil
			}
			last = fmt.Sprintf("state %s, %d members, %d with partitions (%v)", g.State, len(g.Members), withParts, g.Err)
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("group %s never had %d members holding partitions: %s", group, n, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// EndOffsets is the sum of the high watermarks of topic's partitions.
func (k *Kafka) EndOffsets(t testing.TB, topic string) int64 {
	t.Helper()
	return endOffsets(t, []string{k.Direct}, topic)
}

func endOffsets(t testing.TB, seeds []string, topic string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	offs, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err == nil {
		err = offs.Error()
	}
	if err != nil {
		t.Fatalf("end offsets of %s: %v", topic, err)
	}
	var n int64
	offs.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n
}
