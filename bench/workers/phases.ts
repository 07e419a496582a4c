// Where a warm handler call spends its time beyond the floor: the same exchange with one layer more
// at each step, interleaved with the floor in one process. Built from lambda/ with the deployed
// bundle's esbuild options, so it runs the same minified code.
import * as https from 'node:https';
import { Client } from 'simple-oauth2/lib/client';
import ClientCredentialsGrantType from 'simple-oauth2/lib/client-credentials-grant-type';
import { loadConfig } from '../../lambda/config';
import { exchangeToken, grantConfig } from '../../lambda/exchange';
import { agentFor } from '../../lambda/guarded-agents';
import { createHandler } from '../../lambda/handler';
import { powertoolsObservability } from '../../lambda/observability';
import { parseTokenRequest } from '../../lambda/token-request';
import { checkTokenUrl } from '../../lambda/token-url-policy';
import { type Call, expectToken, handlerCall, httpsFloor, tokenEvent } from '../requests';
import { measure } from './measure';
import type { PhaseName } from './phase-names';
import { fail, finish, setting } from './worker-io';

async function main(): Promise<void> {
  const tokenUrl = setting('BENCH_TOKEN_URL');
  const config = loadConfig(process.env);
  const event = tokenEvent(tokenUrl);
  const request = parseTokenRequest(event);
  const target = checkTokenUrl(request.accessTokenUrl, config.allowlist);
  const observability = powertoolsObservability(config.logLevel);
  const record = { route: event.routeKey, outcome: 'ok', status: 200, latency_ms: 0.2 } as const;

  const subjects: Record<PhaseName, Call> = {
    floor: httpsFloor(https, tokenUrl),
    simpleOauth2: async () => {
      const grant = grantConfig(request, target, performance.now() + config.upstreamTimeoutMs);
      const answer = await new ClientCredentialsGrantType(grant, new Client(grant)).getToken(
        { grant_type: 'client_credentials' },
        { agent: agentFor(target.url.protocol, target.permit) },
      );
      expectToken(200, answer.token);
    },
    exchangeToken: async () => expectToken(200, await exchangeToken(request, target, config.upstreamTimeoutMs, {})),
    handlerNoLogs: handlerCall(createHandler(config, { record: () => undefined }), tokenUrl),
    handler: handlerCall(createHandler(config, observability), tokenUrl),
    parseAndPolicy: async () => {
      checkTokenUrl(parseTokenRequest(event).accessTokenUrl, config.allowlist);
    },
    logAndMetrics: async () => observability.record(record),
  };
  await measure(subjects, Number(setting('BENCH_WARMUP')));
  finish({ samples: await measure(subjects, Number(setting('BENCH_ITERATIONS'))) });
}

main().catch(fail);
