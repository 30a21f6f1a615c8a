package sasl

import (
	"math/rand/v2"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ReauthAt is when a connection authenticated at `at` with session
// lifetime l should re-authenticate: a random point in 85-95% of l, as the
// Java client does, so connections opened together do not re-authenticate
// together and a slow drain still ends before the broker's deadline. Zero
// time when l <= 0 (the broker wants no re-authentication).
func ReauthAt(at time.Time, l time.Duration) time.Time {
	if l <= 0 {
		return time.Time{}
	}
	frac := 0.85 + 0.10*rand.Float64()
	return at.Add(time.Duration(float64(l) * frac))
}

// HiddenAPIs are the API keys a client must not be offered while
// origination is on: SaslHandshake and SaslAuthenticate (kproxy has
// authenticated the connection; a client's own attempt would be a
// principal change), and the delegation token APIs (Create, Renew, Expire,
// Describe), which would mint credentials for kproxy's principal.
func HiddenAPIs() []int16 {
	return []int16{
		kmsg.SASLHandshake.Int16(),
		kmsg.SASLAuthenticate.Int16(),
		kmsg.CreateDelegationToken.Int16(),
		kmsg.RenewDelegationToken.Int16(),
		kmsg.ExpireDelegationToken.Int16(),
		kmsg.DescribeDelegationToken.Int16(),
	}
}
