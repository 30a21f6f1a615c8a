package inject

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// The ServiceAccount mode mounts a projected token with the asked
// audience where kproxy.yaml reads the client assertion; the Secret mode
// mounts the Secret whole, so a rotated one reaches kproxy.
func TestOAuthVolumes(t *testing.T) {
	for _, c := range []struct {
		name   string
		o      *OAuth
		volume corev1.VolumeSource
		config []string
	}{
		{"ServiceAccount", &OAuth{TokenEndpoint: "https://idp/token", SAAudience: "https://idp", ClientID: "kafka-orders"},
			corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
				Audience: "https://idp", ExpirationSeconds: ptr(int64(3600)), Path: "token"}}}}},
			[]string{`client_id: "kafka-orders"`, "client_assertion_file: " + OAuthDir + "/token"}},
		{"Secret", &OAuth{TokenEndpoint: "https://idp/token", Secret: "orders-oauth"},
			corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "orders-oauth"}},
			[]string{"client_id_file: " + OAuthDir + "/client-id", "client_secret_file: " + OAuthDir + "/client-secret"}},
	} {
		a := Asked{Listen: 9092, Cluster: &Cluster{Bootstrap: "k:9092", NodePortBase: 9100, NodeIDMax: 99, OAuth: c.o}}
		vols := Volumes(Defaults(), a)
		i := slices.IndexFunc(vols, func(v corev1.Volume) bool { return v.Name == OAuthVolumeName })
		if i < 0 || !reflect.DeepEqual(vols[i].VolumeSource, c.volume) {
			t.Errorf("%s: volumes %+v, want %s as %+v", c.name, vols, OAuthVolumeName, c.volume)
		}
		mounts := Sidecar(Defaults(), a).VolumeMounts
		want := corev1.VolumeMount{Name: OAuthVolumeName, MountPath: OAuthDir, ReadOnly: true}
		if !slices.ContainsFunc(mounts, func(m corev1.VolumeMount) bool { return reflect.DeepEqual(m, want) }) {
			t.Errorf("%s: mounts %+v lack %s at %s", c.name, mounts, OAuthVolumeName, OAuthDir)
		}
		cfg := ClusterConfig(a)
		for _, want := range append(c.config, "mechanism: OAUTHBEARER", `token_endpoint: "https://idp/token"`) {
			if !strings.Contains(cfg, want) {
				t.Errorf("%s: kproxy.yaml lacks %q:\n%s", c.name, want, cfg)
			}
		}
	}
}

func ptr[T any](v T) *T { return &v }
