package audit

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Every config Kafka types as PASSWORD is redacted, listener-prefixed
// forms included; certificates and ordinary configs are kept.
func TestSecretNames(t *testing.T) {
	for _, name := range []string{
		"ssl.key.password", "ssl.keystore.password", "ssl.truststore.password", "ssl.keystore.key",
		"sasl.jaas.config", "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config",
		"listener.name.internal.ssl.keystore.password", "delegation.token.master.key",
		"delegation.token.secret.key", "password.encoder.secret", "password.encoder.old.secret",
		"sasl.oauthbearer.client.credentials.client.secret", "sasl.oauthbearer.assertion.private.key.passphrase",
		"zookeeper.ssl.keystore.password", "zookeeper.ssl.truststore.password", "SSL.KEY.PASSWORD",
		"my.plugin.api.secret", "connector.credentials",
	} {
		if !secret(name) {
			t.Errorf("%s is not redacted", name)
		}
	}
	for _, name := range []string{
		"retention.ms", "cleanup.policy", "ssl.keystore.certificate.chain", "ssl.truststore.certificates",
		"ssl.keystore.location", "ssl.keystore.type", "sasl.enabled.mechanisms", "sasl.oauthbearer.assertion.private.key.file",
		"message.timestamp.type", "log.retention.hours",
	} {
		if secret(name) {
			t.Errorf("%s is redacted but holds no secret", name)
		}
	}
}

// No secret value reaches the output, whichever API carries it.
func TestRedactedInOutput(t *testing.T) {
	const pw = "hunter2-s3cr3t-value"
	h := newHarness(t, Defaults())

	ac := kmsg.NewPtrAlterConfigsRequest()
	ac.Resources = []kmsg.AlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeBroker, ResourceName: "1", Configs: []kmsg.AlterConfigsRequestResourceConfig{
		{Name: "listener.name.external.ssl.keystore.password", Value: ptr(pw)},
		{Name: "listener.name.external.plain.sasl.jaas.config", Value: ptr(`org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="` + pw + `";`)},
		{Name: "ssl.keystore.key", Value: ptr("-----BEGIN PRIVATE KEY-----" + pw)},
		{Name: "log.cleaner.threads", Value: ptr("2")},
	}}}
	ac = wire(t, ac, 1)
	h.log.Begin(testConn, ac.Key(), 1, ac).Settle(kmsg.NewPtrAlterConfigsResponse())

	iac := kmsg.NewPtrIncrementalAlterConfigsRequest()
	iac.Resources = []kmsg.IncrementalAlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeBroker, Configs: []kmsg.IncrementalAlterConfigsRequestResourceConfig{
		{Name: "ssl.truststore.password", Value: ptr(pw)},
	}}}
	iac = wire(t, iac, 1)
	h.log.Begin(testConn, iac.Key(), 1, iac).Unknown()

	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: "t", NumPartitions: 1, ReplicationFactor: 1, Configs: []kmsg.CreateTopicsRequestTopicConfig{{Name: "some.plugin.password", Value: ptr(pw)}}}}
	ct = wire(t, ct, 4)
	h.log.Begin(testConn, ct.Key(), 4, ct).Refused("no-creates", 44, "no")

	ls := h.lines()
	notIn(t, []byte(h.buf.String()), pw)
	notIn(t, []byte(h.buf.String()), "PRIVATE KEY")
	if len(ls) != 3 {
		t.Fatalf("%d lines", len(ls))
	}
	wantFields(t, "alter configs", resources(t, ls[0])[0], map[string]string{"configs": `{"listener.name.external.plain.sasl.jaas.config":"[redacted]",` +
		`"listener.name.external.ssl.keystore.password":"[redacted]","log.cleaner.threads":"2","ssl.keystore.key":"[redacted]"}`})
	wantFields(t, "incremental", resources(t, ls[1])[0], map[string]string{"configs": `{"ssl.truststore.password":"[redacted]"}`})
}
