-- Argo CD health of a posture.dev APIKey: the verdict kstatus gives it.
-- Key in argocd-cm: resource.customizations.health.posture.dev_APIKey
-- A key revoked or expired as declared is Healthy (its Usable condition says it
-- no longer works); an unknown user or a Secret problem is Degraded.
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
local usable = nil
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
  if c.type == "Usable" then
    usable = c
  end
end
if ready ~= nil and ready.status == "True" then
  -- Revoked or expired as declared is healthy; say that it no longer works.
  if usable ~= nil and usable.status == "False" then
    return { status = "Healthy", message = "not usable: " .. (usable.message or usable.reason) }
  end
  return { status = "Healthy", message = ready.message }
end
if ready ~= nil then
  hs.message = ready.message
end
return hs
