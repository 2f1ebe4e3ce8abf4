// The two tools of the recorded fixtures (proxy/testdata/chat/request.json),
// in the Chat Completions format, shared by the Node end-to-end scripts.
export const tools = [
  {
    type: 'function',
    function: {
      name: 'get_current_weather',
      description: 'Get the current weather in a given location',
      parameters: {
        type: 'object',
        properties: {
          location: { type: 'string', description: 'The city and state, e.g. San Francisco, CA' },
          unit: { type: 'string', enum: ['celsius', 'fahrenheit'] },
        },
        required: ['location'],
      },
    },
  },
  {
    type: 'function',
    function: {
      name: 'get_stock_price',
      description: 'Fetch the latest price for a given ticker',
      parameters: {
        type: 'object',
        properties: {
          ticker: { type: 'string', description: 'Ticker symbol, e.g. AAPL' },
          exchange: { type: 'string', description: 'Exchange the ticker is listed on, e.g. NASDAQ' },
        },
        required: ['ticker', 'exchange'],
      },
    },
  },
];
