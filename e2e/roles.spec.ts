/**
 * Dashboard roles in Chromium: each user signs in with their own token; the header says who is
 * signed in and as what; a viewer sees no control that changes anything, an operator gets the
 * job and tube actions but not the tube's settings, an admin gets everything; and the audit page
 * lists what each of them did.
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Page } from '@playwright/test';
import { userNamed, writeUsersFile, type TestUser } from '../test/support/admin-users.js';
import { expect, expectLive, test, tubePath } from './fixtures.js';

const usersFile = writeUsersFile(path.join(mkdtempSync(path.join(os.tmpdir(), 'beanpole-e2e-roles-')), 'users.json'));
test.use({ serverArgs: ['--admin-users', usersFile] });

async function signIn(page: Page, user: TestUser): Promise<void> {
  await expect(page.getByTestId('sign-in-form')).toBeVisible();
  await page.getByTestId('token-input').fill(user.token);
  await page.getByTestId('token-submit').click();
  await expect(page.getByTestId('sign-in-form')).toHaveCount(0);
  await expectLive(page);
  await expect(page.getByTestId('signed-in')).toContainText(user.name);
  await expect(page.getByTestId('signed-in-role')).toHaveText(user.role);
}

test('a viewer sees the jobs but no control that changes them; an operator acts on them; only an admin changes settings', async ({ page, tcp }) => {
  const client = await tcp();
  await client.use('mail');
  const buried = await client.put('to bury');
  await client.watchOnly('mail');
  const job = await client.reserve();
  expect(job.id).toBe(buried);
  await client.bury(buried);

  // A viewer: reads only.
  await page.goto(tubePath('mail', 'buried'));
  await signIn(page, userNamed('vera'));
  await expect(page.getByTestId(`job-row-${buried}`)).toBeVisible();
  await expect(page.getByTestId('dead-letter-current')).toBeVisible();
  for (const control of ['kick-tube', 'pause-tube', `kick-job-${buried}`, `select-${buried}`, 'dead-letter-save']) {
    await expect(page.getByTestId(control), control).toHaveCount(0);
  }
  await expect(page.getByRole('link', { name: 'Put a job', exact: true })).toHaveCount(0);
  await page.goto(`/jobs/${buried}`);
  await expect(page.getByTestId('delete-job')).toHaveCount(0);
  await page.goto('/put');
  await expect(page.getByText('Your role (viewer) cannot put jobs')).toBeVisible();

  // An operator: job and tube actions, no settings.
  await page.getByTestId('sign-out').click();
  await signIn(page, userNamed('otto'));
  await page.goto(tubePath('mail', 'buried'));
  await expect(page.getByTestId('kick-tube')).toBeVisible();
  await expect(page.getByTestId('dead-letter-current')).toBeVisible();
  await expect(page.getByTestId('dead-letter-save')).toHaveCount(0);
  await page.getByTestId(`kick-job-${buried}`).click();
  await expect.poll(() => client.tubeNumber('mail', 'current-jobs-ready')).toBe(1);
  await expect(page.getByRole('link', { name: 'Put a job', exact: true })).toBeVisible();

  // An admin: settings too.
  await page.getByTestId('sign-out').click();
  await signIn(page, userNamed('ada'));
  await page.goto(tubePath('mail'));
  await page.getByTestId('dead-letter-limit').fill('4');
  await page.getByTestId('dead-letter-save').click();
  await expect(page.getByTestId('dead-letter-current')).toHaveAttribute('data-value', '4');

  // The audit page: who did what, newest first.
  await page.getByRole('link', { name: 'Audit' }).click();
  await expect(page.getByRole('heading', { name: 'Audit log' })).toBeVisible();
  const rows = page.getByTestId('audit-entry');
  await expect(rows).toHaveCount(2);
  await expect(rows.nth(0)).toHaveAttribute('data-action', 'tube.settings');
  await expect(rows.nth(0)).toHaveAttribute('data-user', 'ada');
  await expect(rows.nth(0)).toContainText('mail');
  await expect(rows.nth(1)).toHaveAttribute('data-action', 'job.kick');
  await expect(rows.nth(1)).toHaveAttribute('data-user', 'otto');
  await expect(rows.nth(1)).toContainText(`#${buried}`);
});

test('a token that is nobody\'s is refused at sign-in', async ({ page }) => {
  await page.goto('/');
  await expect(page.getByTestId('sign-in-form')).toBeVisible();
  await page.getByTestId('token-input').fill('nobody-has-this');
  await page.getByTestId('token-submit').click();
  await expect(page.getByTestId('token-error')).toContainText(/refused/i);
  await expect(page.getByTestId('signed-in')).toHaveCount(0);
});
