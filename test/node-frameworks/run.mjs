// Runs the cases in TOOLGATE_CASES (a JSON array written by the Go test in
// test/frameworks_test.go), each against its own toolgate, with one agent
// framework running its own tool loop. Each case prints one JSON line: the
// tool runs, the final text, or what the app caught.
import { newRuns } from './tools.mjs';

const frameworks = {
  agents: () => import('./agents.mjs'),
  aisdk: () => import('./aisdk.mjs'),
  anthropic: () => import('./anthropic.mjs'),
};

const cases = JSON.parse(process.env.TOOLGATE_CASES ?? '[]');
if (cases.length === 0) {
  console.error('TOOLGATE_CASES is not set');
  process.exit(2);
}

for (const c of cases) {
  const fw = await frameworks[c.framework]();
  const { runs, weather } = newRuns();
  const out = { id: c.id, runs };
  try {
    out.text = await fw.run(c, weather);
  } catch (err) {
    out.error = fw.caught(err);
  }
  console.log(JSON.stringify(out));
}
