import { Template } from 'aws-cdk-lib/assertions';
import { TokenExchangeStack } from '../../infra/token-exchange-stack';
import { newApp } from './stack-fixture';

describe('the function environment the stack synthesizes', () => {
  it('refuses a NODE_DEBUG added after construction that would print secrets', () => {
    // Prepare
    const stack = new TokenExchangeStack(newApp({ bundle: false }), 'NodeDebugAdded', { allowAnyPublicTokenUrl: true });
    stack.handler.addEnvironment('NODE_DEBUG', 'http');

    // Act
    const synth = () => Template.fromStack(stack);

    // Assess
    expect(synth).toThrow(/TokenExchangeStack: the function would not start: Environment variable NODE_DEBUG must not enable http/);
  });

  it('accepts a NODE_DEBUG that names no network module', () => {
    // Prepare
    const stack = new TokenExchangeStack(newApp({ bundle: false }), 'NodeDebugHarmless', { allowAnyPublicTokenUrl: true });
    stack.handler.addEnvironment('NODE_DEBUG', 'module');

    // Act
    const template = Template.fromStack(stack);

    // Assess
    template.hasResourceProperties('AWS::Lambda::Function', { Environment: { Variables: { NODE_DEBUG: 'module' } } });
  });
});
