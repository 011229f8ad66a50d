package jwtverify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
)

// keySet is a JSON Web Key Set kept up to date by a refresh goroutine. The
// keys live in a jwkset memory storage, which keyfunc reads under its lock
// and the goroutine replaces whole.
type keySet struct {
	field      string // "JWKSFile" or "JWKSURL", for messages
	fetch      func(ctx context.Context) ([]byte, error)
	keys       *jwkset.MemoryJWKSet
	keyfunc    keyfunc.Keyfunc
	refresh    time.Duration
	minRefresh time.Duration
	onError    func(error)
	kick       chan struct{} // an unknown key ID asks for a reload
	stop       context.CancelFunc
	done       chan struct{}

	// Owned by the refresh goroutine once it runs.
	doc      []byte    // the document in force
	lastLoad time.Time // of the last attempt
}

// newKeySet loads the key set once, failing if it cannot, and starts the
// refresh goroutine.
func newKeySet(s *settings) (*keySet, error) {
	k := &keySet{field: "JWKSFile", keys: jwkset.NewMemoryStorage(), refresh: s.refresh, minRefresh: s.minRefresh,
		onError: s.OnRefreshError, kick: make(chan struct{}, 1), done: make(chan struct{})}
	if s.JWKSURL != "" {
		k.field = "JWKSURL"
		k.fetch = func(ctx context.Context) ([]byte, error) { return fetchURL(ctx, s.HTTPClient, s.JWKSURL, s.timeout) }
	} else {
		k.fetch = func(context.Context) ([]byte, error) { return readFile(s.JWKSFile) }
	}
	var err error
	if k.keyfunc, err = keyfunc.New(keyfunc.Options{Storage: k.keys}); err != nil {
		return nil, err
	}
	if err := k.reload(context.Background()); err != nil {
		return nil, &ConfigError{Problems: []FieldError{{k.field, err.Error()}}}
	}
	ctx, stop := context.WithCancel(context.Background())
	k.stop = stop
	go k.run(ctx)
	return k, nil
}

// run reloads every refresh interval, and when asked by an unknown key ID,
// no sooner than minRefresh after the last attempt.
func (k *keySet) run(ctx context.Context) {
	defer close(k.done)
	tick := time.NewTicker(k.refresh)
	defer tick.Stop()
	var asked <-chan time.Time // a reload asked for, waiting for minRefresh
	reported := ""             // the last error reported: a file being replaced, or a server down, fails every time
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-asked:
			asked = nil
		case <-k.kick:
			if asked != nil {
				continue
			}
			if wait := time.Until(k.lastLoad.Add(k.minRefresh)); wait > 0 {
				asked = time.After(wait)
				continue
			}
		}
		err := k.reload(ctx)
		switch {
		case err == nil:
			reported = ""
		case err.Error() != reported && k.onError != nil && ctx.Err() == nil:
			reported = err.Error()
			k.onError(fmt.Errorf("jwtverify: %s: %w; keeping the keys in force", k.field, err))
		}
	}
}

// reload fetches the key set and, if it changed and parses, puts it in
// force.
func (k *keySet) reload(ctx context.Context) error {
	k.lastLoad = time.Now()
	doc, err := k.fetch(ctx)
	if err != nil {
		return err
	}
	if k.doc != nil && bytes.Equal(doc, k.doc) {
		return nil
	}
	keys, err := parseKeySet(doc)
	if err != nil {
		return err
	}
	if err := k.keys.KeyReplaceAll(ctx, keys); err != nil {
		return err
	}
	k.doc = doc
	return nil
}

// unknownKey asks the refresh goroutine for a reload, without waiting.
func (k *keySet) unknownKey() {
	select {
	case k.kick <- struct{}{}:
	default:
	}
}

func (k *keySet) close() {
	k.stop()
	<-k.done
}

// parseKeySet returns the signing keys of a JSON Web Key Set. Symmetric keys
// are left out (HS256 verifies only with Config.Secret, so that a public key
// set cannot carry an HMAC key), and so are encryption keys and key types
// jwkset does not support; a set with no key left is an error.
func parseKeySet(doc []byte) ([]jwkset.JWK, error) {
	var set jwkset.JWKSMarshal
	if err := json.Unmarshal(doc, &set); err != nil {
		return nil, fmt.Errorf("not a JSON Web Key Set: %v", err)
	}
	var keys []jwkset.JWK
	for i, m := range set.Keys {
		if m.KTY == jwkset.KtyOct || m.USE == jwkset.UseEnc {
			continue
		}
		// Private parts, if any, are ignored: only public keys are read.
		key, err := jwkset.NewJWKFromMarshal(m, jwkset.JWKMarshalOptions{}, jwkset.JWKValidateOptions{})
		if errors.Is(err, jwkset.ErrUnsupportedKey) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("key %d (kid %q): %v", i, m.KID, err)
		}
		keys = append(keys, key)
	}
	if len(keys) == 0 {
		return nil, errors.New("the key set has no RSA, EC or Ed25519 signing key")
	}
	return keys, nil
}

func readFile(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readBounded(f)
}

func fetchURL(ctx context.Context, client *http.Client, u string, timeout time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: status %s, want 200", u, resp.Status)
	}
	return readBounded(resp.Body)
}

// readBounded reads a key set of at most maxJWKSBytes.
func readBounded(r io.Reader) ([]byte, error) {
	doc, err := io.ReadAll(io.LimitReader(r, maxJWKSBytes+1))
	if err != nil {
		return nil, err
	}
	if len(doc) > maxJWKSBytes {
		return nil, fmt.Errorf("the key set is larger than %d bytes", maxJWKSBytes)
	}
	return doc, nil
}
