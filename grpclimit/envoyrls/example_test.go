package envoyrls_test

import (
	"context"
	"fmt"

	common "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/faucetgo/faucet/grpclimit/envoyrls"
)

func Example() {
	d, err := envoyrls.ParseDomain("edge.yaml", []byte(`
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 2}
`))
	if err != nil {
		panic(err)
	}
	cfg, _ := envoyrls.NewConfig(d)
	srv, err := envoyrls.New(cfg, envoyrls.Options{})
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	// In a server: g := grpc.NewServer(); srv.Register(g); g.Serve(lis).
	req := &pb.RateLimitRequest{Domain: "edge", Descriptors: []*common.RateLimitDescriptor{{
		Entries: []*common.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "10.0.0.1"}},
	}}}
	for range 3 {
		resp, _ := srv.ShouldRateLimit(context.Background(), req)
		fmt.Println(resp.OverallCode, resp.Statuses[0].LimitRemaining)
	}
	// Output:
	// OK 1
	// OK 0
	// OVER_LIMIT 0
}

func ExampleParseDomain_rejected() {
	_, err := envoyrls.ParseDomain("bad.yaml", []byte(`
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: fortnight, requests_per_unit: 2}
  - key: remote_address
`))
	fmt.Println(err)
	// Output:
	// envoyrls: bad.yaml: descriptors[0].rate_limit.unit: "fortnight" is not one of second, minute, hour, day, week, month, year; descriptors[1]: duplicate descriptor "edge.remote_address" (key "remote_address", value "") at this level
}
