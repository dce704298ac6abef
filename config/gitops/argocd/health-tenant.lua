-- Argo CD health of a posture.dev Tenant: the verdict kstatus gives it.
-- Key in argocd-cm: resource.customizations.health.posture.dev_Tenant
-- Stalled (namespace conflict, unknown role, missing password Secret) is
-- Degraded.
-- Ready counts only for the generation it describes; Reconciling is
-- Progressing, Stalled is Degraded.
local hs = { status = "Progressing", message = "waiting for the Posture operator to reconcile it" }
if obj.status == nil or obj.status.observedGeneration == nil then
  return hs
end
if obj.status.observedGeneration ~= obj.metadata.generation then
  hs.message = "waiting for the Posture operator to observe generation " .. obj.metadata.generation
  return hs
end
local ready = nil
for _, c in ipairs(obj.status.conditions or {}) do
  if c.type == "Stalled" and c.status == "True" then
    return { status = "Degraded", message = c.message }
  end
  if c.type == "Reconciling" and c.status == "True" then
    hs.message = c.message
    return hs
  end
  if c.type == "Ready" and c.observedGeneration == obj.metadata.generation then
    ready = c
  end
end
if ready ~= nil and ready.status == "True" then
  return { status = "Healthy", message = ready.message }
end
if ready ~= nil then
  hs.message = ready.message
end
return hs
