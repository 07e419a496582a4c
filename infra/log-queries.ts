import { Stack } from 'aws-cdk-lib';
import { type ILogGroup, QueryDefinition, QueryString } from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import type { TokenCacheMode } from '../lambda/config';

export interface LogQueriesProps {
  /** One JSON line per request: route, outcome, status, idp_host, idp_latency_ms, cache... (never a client id). */
  readonly functionLogs: ILogGroup;
  /** API Gateway's JSON access log: sourceIp, userAgent, routeKey, status, integrationError... */
  readonly accessLogs: ILogGroup;
  readonly tokenCache: TokenCacheMode;
  /** With `iam`, the access log names each caller's principal (`callerArn`). */
  readonly callerAuthorization: 'none' | 'iam';
}

/**
 * Saved CloudWatch Logs Insights queries for the common questions, in a folder named after the stack:
 * which callers fail (the function logs no client id, so callers are told apart by their IAM
 * principal, source IP and user agent in the access log), which IdPs fail and why, which are slow,
 * how the cache answers, and the bugs.
 */
export class LogQueries extends Construct {
  readonly definitions: QueryDefinition[] = [];

  constructor(scope: Construct, id: string, props: LogQueriesProps) {
    super(scope, id);
    const { functionLogs, accessLogs } = props;

    const caller = props.callerAuthorization === 'iam' ? 'callerArn, ' : '';
    this.add('failures-by-caller', [accessLogs], {
      fields: ['@timestamp', ...(caller ? ['callerArn'] : []), 'sourceIp', 'userAgent', 'routeKey', 'status'],
      filterStatements: ['status like /^[45]/'],
      statsStatements: [`count(*) as answers by ${caller}sourceIp, userAgent, status`],
      sort: 'answers desc',
      limit: 50,
    });
    this.add('gateway-errors', [accessLogs], {
      fields: ['@timestamp', 'status', 'integrationStatus', 'integrationError', 'errorMessage'],
      filterStatements: ['status like /^5/'],
      statsStatements: ['count(*) as answers by status, integrationStatus, integrationError, errorMessage'],
      sort: 'answers desc',
    });
    this.add('failures-by-idp', [functionLogs], {
      fields: ['@timestamp', 'outcome', 'status', 'idp_host', 'idp_status', 'idp_error', 'metadata_error'],
      filterStatements: ['outcome != "ok"'],
      statsStatements: ['count(*) as failures by idp_host, outcome, status, idp_status, idp_error, metadata_error'],
      sort: 'failures desc',
      limit: 50,
    });
    this.add('slow-idps', [functionLogs], {
      fields: ['idp_host', 'idp_latency_ms', 'metadata_latency_ms'],
      filterStatements: ['ispresent(idp_latency_ms) or ispresent(metadata_latency_ms)'],
      statsStatements: [
        'count(*) as requests, pct(idp_latency_ms, 50) as idp_p50_ms, pct(idp_latency_ms, 99) as idp_p99_ms, max(idp_latency_ms) as idp_max_ms, pct(metadata_latency_ms, 99) as metadata_p99_ms by idp_host',
      ],
      sort: 'idp_p99_ms desc',
      limit: 50,
    });
    this.add('internal-errors', [functionLogs], {
      fields: ['@timestamp', 'function_request_id', 'route', 'error_name', 'error_codes'],
      filterStatements: ['outcome = "internal_error"'],
      sort: '@timestamp desc',
      limit: 50,
    });
    if (props.tokenCache !== 'off') {
      this.add('cache-behaviour', [functionLogs], {
        fields: ['cache', 'cache_remembered', 'cache_refresh', 'no_cache', 'cache_error', 'cache_table_latency_ms'],
        filterStatements: ['ispresent(cache) or ispresent(no_cache)'],
        statsStatements: [
          'count(*) as answers, count(cache_error) as table_errors, pct(cache_table_latency_ms, 99) as table_p99_ms by cache, cache_remembered, cache_refresh, no_cache, cache_error',
        ],
        sort: 'answers desc',
      });
    }
  }

  private add(name: string, logGroups: ILogGroup[], query: ConstructorParameters<typeof QueryString>[0]): void {
    this.definitions.push(
      new QueryDefinition(this, name, {
        queryDefinitionName: `${Stack.of(this).stackName}/${name}`,
        queryString: new QueryString(query),
        logGroups,
      }),
    );
  }
}
