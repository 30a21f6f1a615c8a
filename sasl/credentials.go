package sasl

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// maxSecretBytes bounds a credential file: anything larger is a wrong path
// (a log, a bundle), not a username, password or token.
const maxSecretBytes = 1 << 20

// credentials are one reading of the files, used for one authentication.
type credentials struct {
	user, pass, token string
	// principal is the username, or the token's subject ("" when the
	// token is not a JWT with one).
	principal string
}

// secrets lists the values no error or log line may carry.
func (c credentials) secrets() []string {
	return []string{c.pass, c.token}
}

// load reads u's files now, so a rotated Secret applies from this
// authentication on. Errors name the field and file, never the contents.
func load(u *Upstream) (credentials, error) {
	var c credentials
	read := func(field, path string, into *string) error {
		v, err := readSecret(path)
		if err != nil {
			return fmt.Errorf("%s: %w", field, err)
		}
		*into = v
		return nil
	}
	if u.Mechanism == OAuthBearer {
		if err := read("sasl.upstream.token_file", u.TokenFile, &c.token); err != nil {
			return c, err
		}
		c.principal = jwtSubject(c.token)
		return c, nil
	}
	if err := read("sasl.upstream.username_file", u.UsernameFile, &c.user); err != nil {
		return c, err
	}
	if err := read("sasl.upstream.password_file", u.PasswordFile, &c.pass); err != nil {
		return c, err
	}
	if c.user == c.pass {
		// Swapped or doubled paths: the "username" would put the
		// password in every log line and span naming the principal.
		return credentials{}, errors.New("sasl.upstream.username_file and password_file hold the same value: check the paths")
	}
	c.principal = c.user
	return c, nil
}

// readSecret returns the file's contents without trailing line breaks. Its
// errors are os errors (path and cause) or name the path: never contents.
func readSecret(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSecretBytes+1))
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", path, scrubPathErr(err))
	}
	if len(b) > maxSecretBytes {
		return "", fmt.Errorf("%s is larger than 1 MiB: not a credential file", path)
	}
	s := strings.TrimRight(string(b), "\r\n")
	if s == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return s, nil
}

// scrubPathErr keeps an I/O error's cause (it has no contents in it) but
// drops its own copy of the path, which the caller names already.
func scrubPathErr(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// jwtSubject returns the "sub" claim of a JWT, unverified (kproxy only
// names the principal with it; the broker checks the token), or "" when
// token is not a JWT with a string subject.
func jwtSubject(token string) string {
	var claims struct {
		Sub string `json:"sub"`
	}
	jwtClaims(token, &claims)
	return claims.Sub
}

// jwtClaims decodes the payload of a JWT into claims, unverified, and
// reports whether token was a JWT whose payload decoded.
func jwtClaims(token string, claims any) bool {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return false
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	return err == nil && json.Unmarshal(payload, claims) == nil
}
