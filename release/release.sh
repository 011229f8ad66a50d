#!/usr/bin/env bash
# Releases the modules modules.txt marks "yes" as one set at one version,
# rehearses that, or tidies the modules as a release would. See RELEASING.md.
#
#   release/release.sh tidy                 go mod tidy for every module (writes go.mod/go.sum here)
#   release/release.sh rehearse [VERSION]   what CI runs; VERSION defaults to v0.0.0-rehearsal
#   release/release.sh release VERSION      commit and tag VERSION; pushing is left to you
#
# Each works in a temporary git repository: a clone of HEAD for rehearse and
# release (uncommitted changes play no part), a copy of the working tree
# for tidy. There:
#  1. every faucet module requires the others at VERSION, with no replace;
#     go.work replaces the released modules at VERSION by their directories;
#  2. in the order of modules.txt, each module is tidied with GOWORK=off
#     against a file-based module proxy to which each released module is
#     added as soon as it is tidied, so that go.sum records what the tags
#     will serve. tidy copies the go.mod and go.sum files back (faucet's own
#     go.sum lines as they were) and stops here; rehearse and release check
#     that the lines that changed are all faucet's, then
#  3. make one commit, and a tag a released module: VERSION for the root
#     module, DIR/VERSION for the others;
#  4. verify, with a new proxy built from the tags and an empty module cache:
#     go mod tidy -diff in every module, go vet and go build in the released
#     ones, go install of the commands @VERSION from an empty directory, a
#     program outside the repository that requires the released modules at
#     VERSION and imports every public package, and a workspace build of the
#     release commit that takes no faucet module from any proxy.
# release then fetches the commit and the tags into this repository and
# fast-forwards the branch to the commit; rehearse keeps nothing.
set -euo pipefail

usage() {
	echo "usage: $0 tidy | rehearse [VERSION] | release VERSION" >&2
	exit 2
}
mode=${1:-}
case "$mode" in
tidy) [ $# -eq 1 ] || usage ;;
rehearse) [ $# -le 2 ] || usage; version=${2:-v0.0.0-rehearsal} ;;
release) [ $# -eq 2 ] || usage; version=$2 ;;
*) usage ;;
esac

repo=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
head=$(git -C "$repo" rev-parse --verify 'HEAD^{commit}')
started=$SECONDS
step() { printf '\n== %s (%ds)\n' "$*" $((SECONDS - started)); }
die() {
	echo "release: $*" >&2
	exit 1
}

work=$(mktemp -d "${TMPDIR:-/tmp}/faucet-release.XXXXXX")
cleanup() {
	chmod -R u+w "$work" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
R=$work/repo

if [ "$mode" = tidy ]; then
	step "copy the working tree into $R"
	mkdir -p "$R"
	(cd "$repo" && git ls-files -z --cached --others --exclude-standard |
		while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
		tar --null -T - -cf -) | tar -xf - -C "$R"
	git -C "$R" init -q
	git -C "$R" add -A
else
	step "clone HEAD ($(git -C "$repo" rev-parse --short HEAD)) into $R"
	git clone -q --no-checkout "$repo" "$R"
	git -C "$R" checkout -q --detach "$head"
fi
# The temporary repository commits as the user would; a rehearsal or a
# tidy, where nothing is kept, commits with a stand-in if no one is set.
if [ "$mode" != release ]; then
	git -C "$R" config commit.gpgSign false
	git -C "$R" config tag.gpgSign false
	if [ -z "$(git -C "$R" config user.email || true)" ]; then
		git -C "$R" config user.name "faucet release rehearsal"
		git -C "$R" config user.email "rehearsal@invalid"
	fi
fi
if [ "$mode" = tidy ]; then
	git -C "$R" commit -q -m "working tree"
	head=$(git -C "$R" rev-parse HEAD)
fi

step "release tool and module list"
(cd "$R/release" && GOWORK=off go build -o "$work/reltool" ./reltool)
reltool=$work/reltool
"$reltool" modules "$R" >"$work/modules"
cat "$work/modules"
root_path=$(awk '$1 == "." {print $2}' "$work/modules")
tag_of() { # tag_of DIR
	if [ "$1" = . ]; then echo "$version"; else echo "$1/$version"; fi
}
if [ "$mode" = tidy ]; then
	version=$("$reltool" version "$R")
	[ "$version" != none ] || version=v0.0.0-tidy
	echo "the modules require each other at $version"
fi
tags=()
while read -r dir path rel reqs; do
	if [ "$rel" = yes ]; then tags+=("$(tag_of "$dir")"); fi
done <"$work/modules"

if [ "$mode" != tidy ]; then
	# No tag is taken, and a release is above every earlier one.
	for t in "${tags[@]}"; do
		if git -C "$repo" rev-parse -q --verify "refs/tags/$t" >/dev/null; then
			die "tag $t exists already: tags are permanent, choose another version"
		fi
	done
fi
if [ "$mode" = release ]; then
	"$reltool" checkversion "$repo" "$version"
	if git -C "$repo" remote get-url origin >/dev/null 2>&1; then
		for t in "${tags[@]}"; do
			if git -C "$repo" ls-remote --exit-code --tags origin "refs/tags/$t" >/dev/null 2>&1; then
				die "origin has tag $t already"
			fi
		done
	fi
fi

# The go command's environment for everything below: no workspace; faucet's
# modules from the file proxy first and never from the checksum database;
# every other module from the module cache of this machine if it is there,
# else from the usual proxy. A module cache of our own keeps the versions
# served here out of the real one.
shared_cache=$(go env GOMODCACHE)/cache/download
mkdir -p "$shared_cache"
user_proxy=$(go env GOPROXY)
export GOWORK=off GOPRIVATE= GONOPROXY= GONOSUMDB="$root_path${GONOSUMDB:+,$GONOSUMDB}"
export GOFLAGS="-modcacherw${GOFLAGS:+ $GOFLAGS}"
proxy_env() { # proxy_env PROXYDIR MODCACHE
	export GOPROXY="file://$1,file://$shared_cache,$user_proxy" GOMODCACHE=$2
}

step "every faucet module requires the others at $version"
"$reltool" setversion "$R" "$version"
"$reltool" stripsums "$R"

step "tidy each module against a file proxy of the modules before it"
proxy_env "$work/proxy-staged" "$work/modcache-staged"
: >"$work/sums-staged"
while read -r dir path rel reqs; do
	echo "-- $dir ($((SECONDS - started))s)"
	(cd "$R/$dir" && go mod tidy)
	if [ "$rel" = yes ]; then
		# Commit the tree as it is now: this module as its tag will hold it.
		git -C "$R" add -A
		git -C "$R" commit -q --allow-empty -m "wip: $dir"
		"$reltool" zip "$R" HEAD "$version" "$work/proxy-staged" "$dir" | tee -a "$work/sums-staged"
	fi
done <"$work/modules"

if [ "$mode" = tidy ]; then
	step "copy go.mod, go.sum and go.work back"
	"$reltool" restoresums "$R" "$repo"
	n=0
	while read -r dir path rel reqs; do
		for f in go.mod go.sum; do
			src=$R/$dir/$f dst=$repo/$dir/$f
			if [ -e "$src" ] && ! cmp -s "$src" "$dst"; then
				cp "$src" "$dst"
				echo "updated ${dst#"$repo"/}"
				n=$((n + 1))
			fi
		done
	done <"$work/modules"
	if ! cmp -s "$R/go.work" "$repo/go.work"; then
		cp "$R/go.work" "$repo/go.work"
		echo "updated go.work"
		n=$((n + 1))
	fi
	step "tidy: $n files updated"
	exit 0
fi

step "the release changes nothing but faucet's lines"
git -C "$R" reset -q --soft "$head"
git -C "$R" add -A
changed=$(git -C "$R" diff --cached --name-only "$head")
echo "$changed"
unexpected=$(grep -v -E '(^|/)(go\.mod|go\.sum|go\.work)$' <<<"$changed" || true)
[ -z "$unexpected" ] || die "the release would change other files: $unexpected"
root_re=${root_path//./\\.}
foreign=$(git -C "$R" diff --cached -U0 "$head" | grep -E '^[-+]' | grep -v -E '^(\+\+\+|---) ' |
	grep -v -E "$root_re([ /]|\$)" | grep -v -E '^[-+][[:space:]]*(require \(|\)|)$' || true)
if [ -n "$foreign" ]; then
	git -C "$R" diff --cached --stat "$head"
	echo "$foreign"
	die "go mod tidy changes the lines above, which are not faucet's: run release/release.sh tidy and commit what it changes"
fi

step "commit and tag"
git -C "$R" commit -q -F - <<EOF
all modules: release $version

Every faucet module requires the others at $version, and go.sum records
their hashes; go.work replaces them at $version by the tree.

Tags: ${tags[*]}
EOF
commit=$(git -C "$R" rev-parse HEAD)
[ -z "$(git -C "$R" status --porcelain)" ] || die "files left out of the commit: $(git -C "$R" status --porcelain)"
while read -r dir path rel reqs; do
	if [ "$rel" = yes ]; then
		git -C "$R" tag -a -m "$path $version" "$(tag_of "$dir")" "$commit"
	fi
done <"$work/modules"
git -C "$R" log --oneline -1
git -C "$R" tag --points-at "$commit"

step "verify: a new proxy from the tags, as proxy.golang.org will build it"
proxy_env "$work/proxy" "$work/modcache"
: >"$work/sums"
while read -r dir path rel reqs; do
	if [ "$rel" = yes ]; then
		"$reltool" zip "$R" "refs/tags/$(tag_of "$dir")" "$version" "$work/proxy" "$dir" >>"$work/sums"
	fi
done <"$work/modules"
if ! diff "$work/sums-staged" "$work/sums"; then
	die "the modules at the tags differ from those the go.sum files were tidied against"
fi
echo "the modules at the tags hash as the go.sum files record them"

step "verify: go mod tidy -diff in every module; go vet and go build in the released ones"
while read -r dir path rel reqs; do
	echo "-- $dir ($((SECONDS - started))s)"
	(cd "$R/$dir" && go mod tidy -diff)
	if [ "$rel" = yes ]; then
		(cd "$R/$dir" && go vet ./... && go build -o /dev/null ./...)
	fi
done <"$work/modules"

step "verify: go install @$version from an empty directory"
mkdir -p "$work/empty" "$work/gobin"
libs=() lib_mods=() cmds=()
while read -r dir path rel reqs; do
	[ "$rel" = yes ] || continue
	(cd "$R/$dir" && go list -f '{{if .GoFiles}}{{.Name}} {{.ImportPath}}{{end}}' ./...) >"$work/pkgs"
	has_lib=
	while read -r name pkg; do
		case "$pkg" in */internal/* | */internal) continue ;; esac
		if [ "$name" = main ]; then
			cmds+=("$pkg")
		else
			libs+=("$pkg")
			has_lib=1
		fi
	done <"$work/pkgs"
	if [ -n "$has_lib" ]; then lib_mods+=("$path"); fi
done <"$work/modules"
for c in "${cmds[@]}"; do
	echo "go install $c@$version"
	(cd "$work/empty" && GOBIN="$work/gobin" go install "$c@$version")
done
faucet=$work/gobin/faucet
[ -x "$faucet" ] || die "no faucet command was installed"
got=$("$faucet" version)
echo "$got"
case "$got" in "faucet $version" | "faucet $version "*) ;; *) die "faucet version says \"$got\", not $version" ;; esac
"$faucet" sim --rate 10 --burst 50 --load 60/s --duration 2s --svg "$work/sim.svg" | tail -n 3
[ -s "$work/sim.svg" ] || die "faucet sim wrote no chart"

step "verify: a program outside the repository imports every public package"
out=$work/outside
mkdir -p "$out"
{
	echo "// Command outside imports every public package of faucet's released modules."
	echo "package main"
	echo
	echo "import ("
	for p in "${libs[@]}"; do echo "	_ \"$p\""; done
	echo ")"
	echo
	echo "func main() {}"
} >"$out/main.go"
(
	cd "$out"
	go mod init example.com/outside
	for p in "${lib_mods[@]}"; do go mod edit -require="$p@$version"; done
	go mod tidy
	cat go.mod
	if grep -q -E '^[[:space:]]*replace|=>' go.mod; then die "the outside program's go.mod has a replace"; fi
	for p in "${lib_mods[@]}"; do
		awk -v p="$p" -v v="$version" '($1 == p && $2 == v) || ($1 == "require" && $2 == p && $3 == v) {f = 1} END {exit !f}' go.mod ||
			die "the outside program does not require $p $version"
	done
	go vet .
	go build -o outside .
	./outside
)
printf 'imported:'
printf ' %s' "${libs[@]}"
echo

step "verify: the workspace at the release commit takes no faucet module from a proxy"
(
	cd "$R"
	unset GOWORK
	export GOPROXY="file://$shared_cache,$user_proxy"
	pats=()
	while read -r dir path rel reqs; do
		if [ "$dir" = . ]; then pats+=(./...); else pats+=("./$dir/..."); fi
	done <"$work/modules"
	go list -deps -test "${pats[@]}" >/dev/null
	go list -m all | grep -F "$root_path"
)

if [ "$mode" = rehearse ]; then
	step "rehearsal of $version passed (nothing was kept)"
	exit 0
fi

step "fetch the commit and the tags into $repo"
refspecs=()
for t in "${tags[@]}"; do refspecs+=("refs/tags/$t:refs/tags/$t"); done
git -C "$repo" fetch -q "$R" "${refspecs[@]}"
branch=$(git -C "$repo" symbolic-ref -q --short HEAD || true)
if [ "$(git -C "$repo" rev-parse HEAD)" = "$head" ] && git -C "$repo" merge -q --ff-only "$commit"; then
	echo "HEAD is now the release commit:"
	git -C "$repo" log --oneline -1
else
	echo "HEAD moved, or the working tree is in the way: fast-forward to $commit yourself (git merge --ff-only $commit)"
fi
cat <<EOF

Tagged ${tags[*]} at $(git -C "$repo" rev-parse --short "$commit"), in this repository only.
Tags are permanent once pushed: look at the commit, then publish it and the
tags together:

	git push --atomic origin $commit:refs/heads/${branch:-main} ${tags[*]}

and check the release as RELEASING.md says.
EOF
