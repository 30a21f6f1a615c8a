package sasl

import (
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// AuthError is the broker refusing an authentication step: its error code
// and, where it sent one, its message. It never holds a secret.
type AuthError struct {
	// Code is the Kafka error code (58 SASL_AUTHENTICATION_FAILED, 33
	// UNSUPPORTED_SASL_MECHANISM, 34 ILLEGAL_SASL_STATE, ...).
	Code int16
	// Name is the code's name, e.g. SASL_AUTHENTICATION_FAILED.
	Name string
	// Message is the broker's error message, or for a SaslHandshake
	// refusal the mechanisms the broker offers.
	Message string
}

func (e *AuthError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("broker refused: %s (%d)", e.Name, e.Code)
	}
	return fmt.Sprintf("broker refused: %s (%d): %s", e.Name, e.Code, e.Message)
}

func authError(code int16, msg string) *AuthError {
	name := fmt.Sprintf("UNKNOWN_ERROR_CODE_%d", code)
	if ke := kerr.TypedErrorForCode(code); ke != nil && ke.Code == code {
		name = ke.Message
		if msg == "" {
			msg = ke.Description
		}
	}
	return &AuthError{Code: code, Name: name, Message: msg}
}

// redactedText stands where a secret was found in an error.
const redactedText = "[redacted]"

// redacted returns err with no secret in its text: a broker or mechanism
// may echo what it was sent. An *AuthError in err's chain (one this
// package made, for this call) has its Message scrubbed in place, so it
// stays an *AuthError; any other error whose text still carries a secret
// is replaced by one with the same text, secrets replaced.
func redacted(err error, secrets []string) error {
	if err == nil {
		return nil
	}
	scrub := func(t string) (string, bool) {
		hit := false
		for _, s := range secrets {
			if s != "" && strings.Contains(t, s) {
				t, hit = strings.ReplaceAll(t, s, redactedText), true
			}
		}
		return t, hit
	}
	var ae *AuthError
	if errors.As(err, &ae) {
		ae.Message, _ = scrub(ae.Message)
	}
	if text, hit := scrub(err.Error()); hit {
		return redactedError(text)
	}
	return err
}

type redactedError string

func (e redactedError) Error() string { return string(e) }

// stepError names the request a broker refused. It formats when asked, not
// when made, so redacted can scrub the *AuthError inside first.
type stepError struct {
	step string
	err  error
}

func (e *stepError) Error() string { return e.step + ": " + e.err.Error() }
func (e *stepError) Unwrap() error { return e.err }
