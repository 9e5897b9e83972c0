// scripts/conformance-check.mjs — judges one run of the MCP conformance suite against apigate:
// reads the suite's results directory (one checks.json per scenario) and
// scripts/conformance-expected-failures.txt, prints one line per scenario, and exits 1 when a
// required scenario fails, a scenario fails that is not expected to, an expected failure
// passes (stale entry), or an expected "-32601" failure failed any other way.
//
// usage: node conformance-check.mjs RESULTS_DIR EXPECTED_FILE MODE REQUIRED_CSV
import { readdirSync, readFileSync, existsSync } from "node:fs";
import { join } from "node:path";

const [dir, expectedFile, mode, requiredCsv] = process.argv.slice(2);
if (!dir || !expectedFile || !mode || requiredCsv === undefined) {
  console.error("usage: node conformance-check.mjs RESULTS_DIR EXPECTED_FILE MODE REQUIRED_CSV");
  process.exit(2);
}
const required = requiredCsv.split(",").filter(Boolean);

// scenario -> { answer, reason }
const expected = new Map();
for (const [i, raw] of readFileSync(expectedFile, "utf8").split("\n").entries()) {
  const line = raw.trim();
  if (!line || line.startsWith("#")) continue;
  const hash = line.indexOf("#");
  const reason = hash >= 0 ? line.slice(hash + 1).trim() : "";
  const [scenario, modes, answer] = (hash >= 0 ? line.slice(0, hash) : line).trim().split(/\s+/);
  if (!scenario || !["both", "stateful", "stateless"].includes(modes) || !answer || !reason) {
    console.error(`${expectedFile}:${i + 1}: want "scenario both|stateful|stateless -32601|- # reason"`);
    process.exit(2);
  }
  if (modes === "both" || modes === mode) expected.set(scenario, { answer, reason });
}

// The suite names result folders "server-<scenario>-<ISO timestamp>".
const results = new Map();
for (const entry of existsSync(dir) ? readdirSync(dir) : []) {
  const file = join(dir, entry, "checks.json");
  if (!existsSync(file)) continue;
  const scenario = entry.replace(/^server-/, "").replace(/-\d{4}-\d{2}-\d{2}T[\d-]+Z$/, "");
  results.set(scenario, JSON.parse(readFileSync(file, "utf8")));
}

const problems = [];
let passed = 0;
let expectedFailed = 0;
for (const scenario of [...new Set([...required, ...results.keys()])]) {
  const checks = results.get(scenario);
  if (!checks) {
    problems.push(`${scenario}: required but did not run`);
    console.log(`MISSING   ${scenario}`);
    continue;
  }
  const bad = checks.filter((c) => c.status === "FAILURE" || c.status === "WARNING");
  const why = bad.map((c) => `${c.status}: ${c.errorMessage || c.details?.message || c.name}`).join("; ");
  const exp = expected.get(scenario);
  if (bad.length === 0) {
    if (exp) {
      problems.push(`${scenario}: listed as an expected failure but passes (remove it from the list)`);
      console.log(`STALE     ${scenario}`);
    } else {
      passed++;
      console.log(`pass      ${scenario}${required.includes(scenario) ? "  (required)" : ""}`);
    }
    continue;
  }
  if (required.includes(scenario)) {
    problems.push(`${scenario}: required scenario failed: ${why}`);
    console.log(`FAIL      ${scenario}  (required)  ${why}`);
    continue;
  }
  if (!exp) {
    problems.push(`${scenario}: unexpected failure: ${why}`);
    console.log(`FAIL      ${scenario}  ${why}`);
    continue;
  }
  if (exp.answer === "-32601") {
    const failures = checks.filter((c) => c.status === "FAILURE");
    const notFound = failures.length > 0 && failures.every((c) => /MCP error -32601\b/.test(c.errorMessage || ""));
    if (!notFound) {
      problems.push(`${scenario}: expected a -32601 (Method not found) answer, got: ${why}`);
      console.log(`FAIL      ${scenario}  expected -32601, got: ${why}`);
      continue;
    }
  }
  expectedFailed++;
  console.log(`expected  ${scenario}  ${why.slice(0, 110)}`);
}

console.log(
  `\n[${mode}] ${passed} passed, ${expectedFailed} expected failures, ${problems.length} problems`,
);
for (const p of problems) console.log(`  PROBLEM ${p}`);
process.exit(problems.length > 0 ? 1 : 0);
