package inject

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Annotations of SASL origination in the client-pod shape: kproxy, not
// the application, authenticates to the brokers (kproxy.yaml's
// sasl.upstream), with credentials from a Secret the application never
// sees.
const (
	// AnnotationSASLSecret names a Secret in the workload's namespace
	// holding the credentials: keys username and password (PLAIN,
	// SCRAM-SHA-256, SCRAM-SHA-512) or token (OAUTHBEARER, a JWT).
	AnnotationSASLSecret = "kproxy.io/sasl-secret"
	// AnnotationSASLMechanism is sasl.upstream.mechanism; required with
	// AnnotationSASLSecret, and the Secret with it.
	AnnotationSASLMechanism = "kproxy.io/sasl-mechanism"
)

// SASLMechanisms are the values of AnnotationSASLMechanism, kproxy's
// sasl.upstream.mechanism.
var SASLMechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"}

// The credentials Secret's volume, and where the sidecar mounts it:
// whole, never with subPath, so a rotated Secret (the kubelet swaps the
// volume's ..data symlink) reaches kproxy, which reads the files at each
// (re-)authentication.
const (
	SASLVolumeName = "kproxy-sasl"
	SASLDir        = configDir + "/sasl"
)

// saslUpstream reads the SASL annotations into c: both or neither.
func saslUpstream(ann map[string]string, c *Cluster) error {
	name, hasSecret := ann[AnnotationSASLSecret]
	mech, hasMech := ann[AnnotationSASLMechanism]
	switch {
	case !hasSecret && !hasMech:
		return nil
	case !hasSecret:
		return fmt.Errorf("annotation %s needs %s, the Secret holding the credentials", AnnotationSASLMechanism, AnnotationSASLSecret)
	case !hasMech:
		return fmt.Errorf("annotation %s needs %s (one of %s)", AnnotationSASLSecret, AnnotationSASLMechanism, strings.Join(SASLMechanisms, ", "))
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return fmt.Errorf("annotation %s=%q: want a Secret's name: %s", AnnotationSASLSecret, name, strings.Join(errs, "; "))
	}
	if !slices.Contains(SASLMechanisms, mech) {
		return fmt.Errorf("annotation %s=%q: want one of %s", AnnotationSASLMechanism, mech, strings.Join(SASLMechanisms, ", "))
	}
	c.SASLSecret, c.SASLMechanism = name, mech
	return nil
}

// saslSection is the sasl: section of a client-pod kproxy.yaml, if any:
// the files of the mounted Secret that the mechanism reads.
func saslSection(c *Cluster) string {
	if c.SASLSecret == "" {
		return ""
	}
	files := fmt.Sprintf("    username_file: %s/username\n    password_file: %s/password\n", SASLDir, SASLDir)
	if c.SASLMechanism == "OAUTHBEARER" {
		files = fmt.Sprintf("    token_file: %s/token\n", SASLDir)
	}
	return fmt.Sprintf(`sasl:
  # kproxy, not the application, authenticates to the brokers, with the
  # files of the Secret %s, read at each (re-)authentication.
  upstream:
    mechanism: %s
`, c.SASLSecret, c.SASLMechanism) + files
}

// saslVolume is the credentials Secret's volume, all of its keys.
func saslVolume(c *Cluster) corev1.Volume {
	return corev1.Volume{Name: SASLVolumeName, VolumeSource: corev1.VolumeSource{
		Secret: &corev1.SecretVolumeSource{SecretName: c.SASLSecret}}}
}
