package inject

import (
	"fmt"
	"net/url"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Annotations of OAuth at the sidecar in the client-pod shape: kproxy
// fetches OAUTHBEARER tokens itself (sasl.upstream.oauth), with the
// client's credentials from a Secret, or with the pod's own
// ServiceAccount token as the client assertion.
const (
	// AnnotationOAuthTokenEndpoint is the authorization server's token
	// URL; required with either of the two below.
	AnnotationOAuthTokenEndpoint = "kproxy.io/oauth-token-endpoint"
	// AnnotationOAuthSecret names a Secret with keys client-id and
	// client-secret.
	AnnotationOAuthSecret = "kproxy.io/oauth-secret"
	// AnnotationOAuthServiceAccountAudience mounts a projected
	// ServiceAccount token with this audience as the client assertion
	// (RFC 7523); the client id is then AnnotationOAuthClientID.
	AnnotationOAuthServiceAccountAudience = "kproxy.io/oauth-service-account-audience"
	// AnnotationOAuthClientID is the OAuth client id, required with the
	// ServiceAccount token (a Secret holds its own).
	AnnotationOAuthClientID = "kproxy.io/oauth-client-id"
	// AnnotationOAuthScope and AnnotationOAuthAudience are
	// sasl.upstream.oauth's scope and audience.
	AnnotationOAuthScope    = "kproxy.io/oauth-scope"
	AnnotationOAuthAudience = "kproxy.io/oauth-audience"
)

// oauthAnnotations are all of the above, for the mode check.
var oauthAnnotations = []string{AnnotationOAuthTokenEndpoint, AnnotationOAuthSecret, AnnotationOAuthServiceAccountAudience,
	AnnotationOAuthClientID, AnnotationOAuthScope, AnnotationOAuthAudience}

// The OAuth volume (the Secret, or the projected ServiceAccount token)
// and where the sidecar mounts it: whole, so a rotated Secret or the
// kubelet's renewed token reaches kproxy, which reads the files at each
// token fetch.
const (
	OAuthVolumeName = "kproxy-oauth"
	OAuthDir        = configDir + "/oauth"
	// oauthTokenSeconds is the projected token's lifetime; the kubelet
	// renews it at 80% of that.
	oauthTokenSeconds = 3600
)

// OAuth is what the OAuth annotations ask for.
type OAuth struct {
	TokenEndpoint string
	Secret        string // the Secret's name; "" with the ServiceAccount token
	SAAudience    string // the projected token's audience; "" with a Secret
	ClientID      string
	Scope         string
	Audience      string
}

// oauthUpstream reads the OAuth annotations into c, refusing them beside
// kproxy.io/sasl-secret (two sources of credentials) or half given.
func oauthUpstream(ann map[string]string, c *Cluster) error {
	asked := false
	for _, k := range oauthAnnotations {
		_, set := ann[k]
		asked = asked || set
	}
	if !asked {
		return nil
	}
	o := &OAuth{TokenEndpoint: ann[AnnotationOAuthTokenEndpoint], Secret: ann[AnnotationOAuthSecret],
		SAAudience: ann[AnnotationOAuthServiceAccountAudience], ClientID: ann[AnnotationOAuthClientID],
		Scope: ann[AnnotationOAuthScope], Audience: ann[AnnotationOAuthAudience]}
	u, err := url.Parse(o.TokenEndpoint)
	switch {
	case c.SASLSecret != "":
		return fmt.Errorf("annotations %s and %s are two sources of broker credentials: use one", AnnotationOAuthTokenEndpoint, AnnotationSASLSecret)
	case o.TokenEndpoint == "":
		return fmt.Errorf("the OAuth annotations need %s, the authorization server's token URL", AnnotationOAuthTokenEndpoint)
	case err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "":
		return fmt.Errorf("annotation %s=%q: want an https URL", AnnotationOAuthTokenEndpoint, o.TokenEndpoint)
	case o.Secret == "" && o.SAAudience == "":
		return fmt.Errorf("annotation %s needs %s (a Secret with client-id and client-secret) or %s (the pod's ServiceAccount token as the client assertion)",
			AnnotationOAuthTokenEndpoint, AnnotationOAuthSecret, AnnotationOAuthServiceAccountAudience)
	case o.Secret != "" && o.SAAudience != "":
		return fmt.Errorf("annotations %s and %s are two ways to authenticate the OAuth client: use one", AnnotationOAuthSecret, AnnotationOAuthServiceAccountAudience)
	case o.SAAudience != "" && o.ClientID == "":
		return fmt.Errorf("annotation %s needs %s", AnnotationOAuthServiceAccountAudience, AnnotationOAuthClientID)
	case strings.ContainsAny(o.ClientID+o.Scope+o.Audience+o.SAAudience, "\n\r\"\\"):
		return fmt.Errorf("the OAuth annotations' values may not hold quotes, backslashes or line breaks")
	}
	if o.Secret != "" {
		if errs := validation.IsDNS1123Subdomain(o.Secret); len(errs) > 0 {
			return fmt.Errorf("annotation %s=%q: want a Secret's name: %s", AnnotationOAuthSecret, o.Secret, strings.Join(errs, "; "))
		}
	}
	c.OAuth = o
	return nil
}

// oauthSection is the sasl: section of a client-pod kproxy.yaml for
// OAuth, if asked.
func oauthSection(c *Cluster) string {
	o := c.OAuth
	if o == nil {
		return ""
	}
	s := fmt.Sprintf(`sasl:
  # kproxy fetches OAUTHBEARER tokens itself and refreshes them before
  # they expire; the application holds no credentials.
  upstream:
    mechanism: OAUTHBEARER
    oauth:
      token_endpoint: %q
`, o.TokenEndpoint)
	if o.Secret != "" {
		s += fmt.Sprintf("      # The Secret %s, read at each token fetch.\n", o.Secret)
		if o.ClientID != "" {
			s += fmt.Sprintf("      client_id: %q\n", o.ClientID)
		} else {
			s += fmt.Sprintf("      client_id_file: %s/client-id\n", OAuthDir)
		}
		s += fmt.Sprintf("      client_secret_file: %s/client-secret\n", OAuthDir)
	} else {
		s += fmt.Sprintf("      # The pod's ServiceAccount token (audience %s), renewed by the kubelet.\n", o.SAAudience)
		s += fmt.Sprintf("      client_id: %q\n      client_assertion_file: %s/token\n", o.ClientID, OAuthDir)
	}
	if o.Scope != "" {
		s += fmt.Sprintf("      scope: %q\n", o.Scope)
	}
	if o.Audience != "" {
		s += fmt.Sprintf("      audience: %q\n", o.Audience)
	}
	return s
}

// oauthVolume is the Secret, or the projected ServiceAccount token.
func oauthVolume(o *OAuth) corev1.Volume {
	if o.Secret != "" {
		return corev1.Volume{Name: OAuthVolumeName, VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: o.Secret}}}
	}
	seconds := int64(oauthTokenSeconds)
	return corev1.Volume{Name: OAuthVolumeName, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
			Audience: o.SAAudience, ExpirationSeconds: &seconds, Path: "token"}}}}}}
}
