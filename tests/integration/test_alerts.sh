# Issue 6, point 5: deploy/prometheus/alerts.yml passes `promtool check rules`, and
# `promtool test rules` passes alerts_test.yml, which has a firing and a silent case for
# every alert. Also checks that every alert of alerts.yml has a test, and that the test
# catches a broken rule (a threshold changed on purpose).
source "$(dirname "$0")/lib.sh"
dir="$SRC/deploy/prometheus"
out=$(promtool check rules "$dir/alerts.yml" 2>&1) && pass "promtool check rules: $(grep -o 'SUCCESS.*' <<<"$out")" \
  || fail "promtool check rules: $out"
out=$(cd "$dir" && promtool test rules alerts_test.yml 2>&1) && pass "promtool test rules alerts_test.yml: SUCCESS" \
  || fail "promtool test rules: $out"
for a in $(grep -oE 'alert: [A-Za-z]+' "$dir/alerts.yml" | cut -d' ' -f2); do
  n=$(grep -c "alertname: $a\$" "$dir/alerts_test.yml" || true)
  fires=$(awk -v a="$a" '$0 ~ "alertname: " a "$" { getline; print }' "$dir/alerts_test.yml" | grep -c 'exp_alerts:$' || true)
  silent=$(awk -v a="$a" '$0 ~ "alertname: " a "$" { getline; print }' "$dir/alerts_test.yml" | grep -c 'exp_alerts: \[\]' || true)
  [ "$fires" -ge 1 ] && [ "$silent" -ge 1 ] && pass "$a: $fires firing and $silent silent case(s)" \
    || fail "$a: $fires firing and $silent silent cases ($n in all)"
done
# A rule with a wrong threshold must fail its test.
mkdir -p "$WORK/broken"
sed 's/increase(elastrain_failures_total\[1h\]) > 3/increase(elastrain_failures_total[1h]) > 30/' "$dir/alerts.yml" >"$WORK/broken/alerts.yml"
cp "$dir/alerts_test.yml" "$WORK/broken/"
if (cd "$WORK/broken" && promtool test rules alerts_test.yml >/dev/null 2>&1); then
  fail "the tests did not notice a broken failure-rate threshold"
else
  pass "a broken threshold fails promtool test rules"
fi
finish
