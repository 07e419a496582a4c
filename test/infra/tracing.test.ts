import { Match } from 'aws-cdk-lib/assertions';
import { AwsSolutionsChecks } from 'cdk-nag';
import { propsFromContext } from '../../infra/app';
import type { TracingMode } from '../../infra/token-exchange-stack';
import { synthesize } from './stack-fixture';

describe('tracing', () => {
  it('is off by default: no trace configuration, and nothing of X-Ray in the role', () => {
    const { template } = synthesize();

    template.hasResourceProperties('AWS::Lambda::Function', { TracingConfig: Match.absent() });
    template.resourceCountIs('AWS::IAM::Policy', 0);
  });

  it('traces every invocation with active, and lets the role write traces and nothing else of X-Ray', () => {
    const { stack, template } = synthesize({ tracing: 'active' });

    template.hasResourceProperties('AWS::Lambda::Function', { TracingConfig: { Mode: 'Active' } });
    template.hasResourceProperties('AWS::IAM::Policy', {
      PolicyDocument: { Statement: [{ Effect: 'Allow', Action: ['xray:PutTelemetryRecords', 'xray:PutTraceSegments'], Resource: '*' }] },
    });
    expect(new AwsSolutionsChecks().validateScope(stack).violations).toEqual([]);
  });

  it('refuses a mode other than off or active, naming the prop', () => {
    expect(() => synthesize({ tracing: 'passthrough' as TracingMode })).toThrow(/tracing must be one of off, active, got passthrough/);
  });

  it('is read from context as `-c tracing=active`', () => {
    expect(propsFromContext((key) => (key === 'tracing' ? 'Active' : undefined)).tracing).toBe('active');
  });
});
