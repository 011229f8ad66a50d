// Package grpclimit rate-limits gRPC servers with faucet's HTTP rules:
// unary and stream server interceptors that decide each call with an
// httplimit.Middleware, answering codes.ResourceExhausted with the wait in
// a google.rpc.RetryInfo detail and the IETF RateLimit fields as response
// metadata. Package envoyrls, in this module, is Envoy's rate-limit
// service.
//
// The rules' two shapes that see a call through, not only its start,
// apply to calls as to requests (see Limiter): an in-flight limit counts
// the calls being served, a stream for as long as it is open, and a rule
// in delay mode holds a call over the rate back until its turn instead of
// refusing it.
//
// The module is apart from faucet's core so that gRPC and Envoy's protos
// are dependencies only of those who use them.
package grpclimit
