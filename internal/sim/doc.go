// Package sim is faucet's simulator: it drives one key of an engine with a
// steady stream of requests on a virtual clock and reports, per interval,
// how many were admitted and denied and the tokens left; it can change the
// rate during the run, as engine.SetLimitAt does, pause the client, and
// draw the run as an SVG chart. It runs a calendar quota (engine.Quota)
// and a strict window (engine.Window) too, instead of the token bucket or
// beside it: each shape gets the same load on a limiter of its own, and
// the report and the chart show them side by side. With an upstream of
// a given capacity behind the token bucket (upstream.go), an
// adaptive.Controller sets the bucket's rate from the upstream's health,
// and the report and the chart show how the rate follows the capacity.
//
// Both the faucet command (faucet sim) and the light sim command at the
// root of the module run it through Main. It needs nothing but the
// standard library, the engine and package adaptive, and draws the chart itself, so that
// trying faucet out compiles no server or plotting dependency.
//
// Package sim is an implementation detail of faucet's commands; its API
// may change without notice.
package sim
