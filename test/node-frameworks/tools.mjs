// The local tools every framework runs, and the record of each run. A run
// is recorded with the arguments exactly as the framework handed them over,
// so the Go test can tell a repaired call from the model's broken one.
import { z } from 'zod';

export const question = "What's the weather like in Boston today?";

export const weatherDescription = 'Get the current weather in a given location';

// The zod schema the frameworks turn into JSON Schema themselves.
export const weatherSchema = z.object({
  location: z.string().describe('The city and state, e.g. San Francisco, CA'),
  unit: z.enum(['celsius', 'fahrenheit']),
});

// The same schema written by hand, for the SDK that takes JSON Schema.
export const weatherJSONSchema = {
  type: 'object',
  properties: {
    location: { type: 'string', description: 'The city and state, e.g. San Francisco, CA' },
    unit: { type: 'string', enum: ['celsius', 'fahrenheit'] },
  },
  required: ['location', 'unit'],
  additionalProperties: false,
};

// newRuns returns the recorder of one case and the tool body.
export function newRuns() {
  const runs = [];
  const weather = async (args) => {
    runs.push({ tool: 'get_current_weather', args });
    return JSON.stringify({ temperature: 22, unit: args.unit, location: args.location });
  };
  return { runs, weather };
}
